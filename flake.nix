{
  description = "megacpp-env: one stack.yaml for the MegaCpp training and serving stack";

  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.05";
    flake-utils.url = "github:numtide/flake-utils";
  };

  outputs = { self, nixpkgs, flake-utils }:
    flake-utils.lib.eachSystem [ "x86_64-linux" "aarch64-linux" ] (system:
      let
        pkgs = import nixpkgs { inherit system; };
        pins = import ./nix/pins.nix;
        pyAttr = "python" + builtins.replaceStrings [ "." ] [ "" ] pins.python;
        python = pkgs.${pyAttr};
        gcc = pkgs."gcc${pins.gcc}";
        megacpp-env = python.pkgs.buildPythonApplication {
          pname = "megacpp-env";
          version = pins.tool;
          pyproject = true;
          src = ./.;
          build-system = [ python.pkgs.setuptools ];
          dependencies = with python.pkgs; [ jinja2 pyyaml packaging ];
          # uv is called as an external tool (lock); nixpkgs' uv binary is put on PATH.
          makeWrapperArgs = [ "--prefix" "PATH" ":" (pkgs.lib.makeBinPath [ pkgs.uv pkgs.git ]) ];
          nativeCheckInputs = with python.pkgs; [ pytestCheckHook hypothesis ];
          doCheck = false; # the suite needs Docker, git daemons and PyPI; run it with `pytest` in the dev shell
          meta.mainProgram = "megacpp-env";
        };
      in {
        packages.default = megacpp-env;
        packages.megacpp-env = megacpp-env;
        apps.default = flake-utils.lib.mkApp { drv = megacpp-env; };
        devShells.default = pkgs.mkShell {
          packages = [
            (python.withPackages (ps: with ps; [ jinja2 pyyaml packaging pytest hypothesis nvidia-ml-py mypy types-pyyaml ]))
            pkgs.uv
            pkgs.ruff
            pkgs.git
            pkgs.docker-client
            pkgs.hadolint
            gcc
          ];
          shellHook = ''
            export MEGACPP_ENV_SPEC="$PWD/stack.yaml"
            echo "megacpp-env dev shell: python ${pins.python}, gcc ${pins.gcc}, uv from nixpkgs (stack pins ${pins.uv})"
          '';
        };
      });
}
