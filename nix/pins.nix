# Versions the Nix dev shell shares with stack.yaml. Plain data: `nix-instantiate --eval --strict --json`
# reads it offline, and tests/test_flake.py checks it against stack.yaml and pyproject.toml.
{
  python = "3.13";   # toolchains.*.python
  gcc = "15";        # toolchains.*.gcc
  uv = "0.13.9";     # toolchains.*.uv
  tool = "0.1.0";    # megacpp_env.__version__
}
