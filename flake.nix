{
  description = "megacpp-env: one stack.yaml for the MegaCpp training and serving stack";

  # nixpkgs is pinned to one revision of the nixos-25.05 branch (committed 2026-01-02), not to the
  # moving branch, so the dev shell and the package do not float. A flake.lock would also record
  # nixpkgs' narHash; computing it needs the nixpkgs tarball, which cannot be fetched where this
  # repository is developed, so no flake.lock is committed (README: "Nix"). `nix flake lock`
  # writes it on the first use; commit it there.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/ac62194c3917d5f474c1a844b6fd6da2db95077d";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      pins = import ./nix/pins.nix;
      perSystem = pkgs:
        let
          python = pkgs."python${builtins.replaceStrings [ "." ] [ "" ] pins.python}";
          megacpp-env = python.pkgs.buildPythonApplication {
            pname = "megacpp-env";
            version = pins.tool;
            pyproject = true;
            src = ./.;
            build-system = [ python.pkgs.setuptools ];
            # [project].dependencies of pyproject.toml (tests/test_flake.py keeps them equal). `uv` is
            # nixpkgs' python wrapper of nixpkgs' uv binary: uv.find_uv_bin() finds it, so `lock`
            # runs without uv on PATH. The stack pins uv ${pins.uv} for the images; nixpkgs at this
            # revision has an older uv, so the ">=0.12.1" floor is relaxed here (pythonRelaxDeps) for
            # the other verbs; `lock` refuses a uv below the floor and says so. Set MEGACPP_ENV_UV to a
            # uv ${pins.uv} binary to lock, and to reproduce the committed locks byte for byte.
            dependencies = with python.pkgs; [ jinja2 pyyaml packaging uv tomli-w nvidia-ml-py ];
            pythonRelaxDeps = [ "uv" ];
            # git for checkout/gate, docker for build: found on PATH like any user's tools.
            makeWrapperArgs = [ "--suffix" "PATH" ":" (pkgs.lib.makeBinPath [ pkgs.git ]) ];
            nativeCheckInputs = with python.pkgs; [ pytestCheckHook hypothesis ];
            doCheck = false; # the suite needs Docker, git daemons and a wheelhouse; run it in the dev shell
            pythonImportsCheck = [ "megacpp_env" ];
            meta = {
              description = "Reproducible environments for the MegaCpp training and serving stack";
              license = pkgs.lib.licenses.asl20;
              mainProgram = "megacpp-env";
            };
          };
          gcc = pkgs."gcc${pins.gcc}";
        in {
          package = megacpp-env;
          shell = pkgs.mkShell {
            # The tool itself is on PATH (the packaged build of this checkout); `python -m megacpp_env`
            # runs the working tree. The interpreter has the tool's and the tests' dependencies.
            packages = [
              megacpp-env
              (python.withPackages (ps: with ps; [ jinja2 pyyaml packaging uv tomli-w nvidia-ml-py pytest hypothesis jsonschema mypy types-pyyaml ]))
              pkgs.uv
              pkgs.ruff
              pkgs.git
              pkgs.docker-client
              pkgs.hadolint
              gcc
            ];
            shellHook = ''
              echo "megacpp-env dev shell: megacpp-env ${pins.tool}, python ${pins.python}, gcc ${pins.gcc}, uv from nixpkgs (stack pins ${pins.uv})"
            '';
          };
        };
    in {
      packages = forAllSystems (pkgs: rec {
        megacpp-env = (perSystem pkgs).package;
        default = megacpp-env;
      });
      apps = forAllSystems (pkgs: {
        default = {
          type = "app";
          program = "${(perSystem pkgs).package}/bin/megacpp-env";
        };
      });
      devShells = forAllSystems (pkgs: { default = (perSystem pkgs).shell; });
    };
}
