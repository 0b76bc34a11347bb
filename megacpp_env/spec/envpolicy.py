"""Which environment variables a spec may set (``env.build``, ``env.runtime``, ``sources.*.build_env``).

The principle: a variable is refused when it makes a program load or run code that the variable
itself names, in every process that inherits it, rather than configure the one program that reads
it. Such a variable turns an innocent-looking spec line into code execution in every ``RUN`` step and
every process of the image. The families:

1. shell start-up and prompt hooks (``BASH_ENV``, ``ENV``, ``PROMPT_COMMAND``, ``PS4`` ...): bash and
   sh source or evaluate them before running anything;
2. the dynamic loader (every ``LD_*`` but the search path ``LD_LIBRARY_PATH``, and glibc's
   ``GCONV_PATH``, ``NLSPATH`` ...): they inject libraries or redirect the loader;
3. interpreter start-up hooks and options (``PYTHONSTARTUP``, ``PYTHONHOME``, ``PERL5OPT``,
   ``NODE_OPTIONS``, ``JAVA_TOOL_OPTIONS`` ...): code or options injected into every interpreter;
4. helper commands that tools run on their own (``GIT_SSH_COMMAND``, ``GIT_CONFIG_*``, ``EDITOR``,
   ``PAGER``, ``LESSOPEN`` ...);
5. configuration files and stores that a tool loads from the path the variable names (``HOME``,
   ``XDG_CONFIG_HOME``, ``ZDOTDIR``, ``OPENSSL_CONF``, ``PIP_CONFIG_FILE``, ``GIT_ALTERNATE_OBJECT_DIRECTORIES``,
   ``MAKEFILES``, ``SSL_CERT_FILE`` ...), every variable of the namespaces of the tools that fetch
   (``GIT_*``, ``XDG_*``, ``OPENSSL_*``, ``CURL_*``, ``SSL_*`` ...), and where pip and uv take packages
   from (``PIP_INDEX_URL``, ``UV_FIND_LINKS`` ...): a build step's downloads, trust roots, git objects
   and package sources come from the tool and the lock, never from a spec line.

6. CMake code named by a variable: ``CMAKE_TOOLCHAIN_FILE``, ``CMAKE_PROJECT_INCLUDE``, a compiler or linker
   launcher, and the same given to cmake inside ``CMAKE_ARGS`` (``-DCMAKE_TOOLCHAIN_FILE=...``, ``-C file``,
   ``-P``, ``--toolchain``): such code belongs in the source's overlay, reviewed with its build files.
   (``PYTHONWARNINGS`` is family 3: a filter's category names a module that every interpreter imports.)

Build variables (``env.build``, ``env.sources``, ``sources.*.build_env``) are judged twice: here, by
name, at load time; and by ``megacpp-env check`` (rule UP001) against what the source's facts say its
build files read, so a name outside the compiler and CUDA knobs must be one the build really reads.

Search paths (``PATH``, ``LD_LIBRARY_PATH``, ``PYTHONPATH``, ``CPATH`` ...) and compiler knobs (``CC``,
``CFLAGS``, ``CMAKE_ARGS``) are what images legitimately need and stay allowed; a search path must
hold absolute directories only (an empty or relative entry means "the current directory", the
classic hijack). Every value still passes the string checks of ``spec.fields``.
"""

from __future__ import annotations

import re
import shlex

_SHELL = frozenset({
    "BASH_ENV", "ENV", "PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS3", "PS4", "SHELLOPTS", "BASHOPTS",
    "BASH_XTRACEFD", "IFS", "CDPATH", "GLOBIGNORE", "BASH_LOADABLES_PATH", "BASH_COMPAT", "INPUTRC",
})  # fmt: skip
_LOADER = frozenset({"GCONV_PATH", "NLSPATH", "LOCPATH", "HOSTALIASES", "RESOLV_HOST_CONF", "MALLOC_TRACE"})
_INTERPRETER = frozenset({
    "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONHOME", "PYTHONBREAKPOINT", "PYTHONEXECUTABLE", "PYTHONUSERBASE",
    "PYTHONWARNINGS",  # a filter's category is a module:class that is imported: any module runs
    "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
    "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "LUA_INIT", "TCLLIBPATH",
})  # fmt: skip
_HELPERS = frozenset({
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PROXY_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS",
    "GIT_EXTERNAL_DIFF", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_EDITOR", "GIT_PAGER", "GIT_SEQUENCE_EDITOR",
    "EDITOR", "VISUAL", "PAGER", "MANPAGER", "LESSOPEN", "LESSCLOSE", "BROWSER",
})  # fmt: skip
_FILES = frozenset({
    "HOME", "ZDOTDIR", "OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES", "PIP_CONFIG_FILE", "UV_CONFIG_FILE",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE",
    "GIT_COMMON_DIR", "MAKEFILES", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "CURL_HOME", "NETRC", "WGETRC", "CONDARC", "NPM_CONFIG_USERCONFIG", "DOCKER_CONFIG", "KUBECONFIG",
    "GNUPGHOME", "HGRCPATH", "TERMINFO", "TERMINFO_DIRS", "MAGIC", "PYTHONPYCACHEPREFIX", "PYTHONPLATLIBDIR",
    "SSH_AUTH_SOCK", "TMPDIR", "CCACHE_CONFIGPATH", "CCACHE_DIR", "SCCACHE_CONF",
    "SETUPTOOLS_USE_DISTUTILS", "DISTUTILS_CONFIG", "PYDISTUTILS_CFG", "TWINE_CONFIG_FILE", "PYPIRC",
})  # fmt: skip
_FILE_PREFIXES = ("GIT_", "XDG_", "OPENSSL_", "CURL_", "SSL_", "NPM_CONFIG_", "CONDA_", "DOCKER_")
# pip's and uv's settings stay allowed (PIP_NO_INDEX, UV_NO_BUILD_ISOLATION), but not where they load a
# configuration, certificates or packages from: the lock says where packages come from
_INSTALLER_SOURCES = frozenset({
    "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_TRUSTED_HOST", "PIP_CERT", "PIP_CLIENT_CERT",
    "PIP_CONSTRAINT", "PIP_REQUIREMENT", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_INDEX", "UV_DEFAULT_INDEX",
    "UV_FIND_LINKS", "UV_CONSTRAINT", "UV_OVERRIDE", "UV_BUILD_CONSTRAINT", "UV_INSECURE_HOST",
})  # fmt: skip
# CMake loads and runs the CMake code these name (a toolchain file; an include at project(); a launcher
# runs for every compile): in a spec, where they would not be reviewed with the source's build files.
_CMAKE_CODE = re.compile(
    r"CMAKE_TOOLCHAIN_FILE|CMAKE_PROJECT_(?:[A-Za-z0-9_]+_)?INCLUDE(?:_BEFORE)?|CMAKE_PROJECT_TOP_LEVEL_INCLUDES"
    r"|CMAKE_USER_MAKE_RULES_OVERRIDE(?:_[A-Z]+)?|CMAKE_[A-Z]+_(?:COMPILER|LINKER)_LAUNCHER"
)
# Variables whose value is a cmake command line (setup.py builds pass them on to cmake).
_CMAKE_ARG_VARS = re.compile(r"(?:[A-Z0-9_]+_)?CMAKE_ARGS|CMAKE_(?:ARGUMENTS|FLAGS|OPTIONS)")
_PREFIXES = {
    "LD_": "the dynamic loader",
    "BASH_FUNC_": "a shell start-up hook",
    "GIT_CONFIG_KEY_": "a helper command",
    "GIT_CONFIG_VALUE_": "a helper command",
}
SEARCH_PATHS = frozenset({
    "PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
    "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH", "MANPATH", "CUDA_PATH", "CUDA_HOME",
})  # fmt: skip
_REMEDY = {
    "a shell start-up hook": "run the commands explicitly in a build step instead",
    "the dynamic loader": "link the library, or set it for the one command that needs it, not the whole image",
    "an interpreter start-up hook": "import or pass the option explicitly in the program that needs it",
    "a helper command": "configure the tool explicitly for the one step that needs it",
    "CMake load code": (
        "a toolchain file, a project include or a launcher is code: put it in the source's overlay, where it is "
        "reviewed with the build files, and have them use it"
    ),
    "a tool load a configuration file or store it names": (
        "drop it: the image's tools keep their own configuration; a build variable must be a compiler "
        "or CUDA knob, or one the source's build files read (facts/<source>.toml)"
    ),
}


BUILD_KNOBS = frozenset({
    "CC", "CXX", "CPP", "CUDAHOSTCXX", "CUDACXX", "CUDAARCHS", "AR", "NM", "RANLIB", "LD", "CFLAGS", "CXXFLAGS",
    "CPPFLAGS", "LDFLAGS", "CUDAFLAGS", "MAX_JOBS", "MAKEFLAGS", "TORCH_CUDA_ARCH_LIST", "TORCH_NVCC_FLAGS",
    "SOURCE_DATE_EPOCH", "SETUPTOOLS_SCM_PRETEND_VERSION",
})  # fmt: skip
_KNOB_PREFIXES = ("NVCC_", "CUDA_", "CMAKE_", "CUTLASS_NVCC_", "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_")


def is_build_knob(name: str) -> bool:
    """A compiler, CUDA or build-system variable: allowed in any build env without facts to back it
    (every other build variable must be one the source's build files read: rule UP001)."""
    return name in BUILD_KNOBS or name in SEARCH_PATHS or name.startswith(_KNOB_PREFIXES)


def family(name: str) -> str:
    """The family (see the module docstring) of a refused variable, or '' when it is allowed."""
    if name in SEARCH_PATHS:
        return ""
    for names, what in (
        (_SHELL, "a shell start-up hook"),
        (_LOADER, "the dynamic loader"),
        (_INTERPRETER, "an interpreter start-up hook"),
        (_HELPERS, "a helper command"),
        (_FILES, "a tool load a configuration file or store it names"),
    ):
        if name in names:
            return what
    if name.upper().startswith(_FILE_PREFIXES) or name.upper() in _FILES | _INSTALLER_SOURCES:
        return "a tool load a configuration file or store it names"
    return next((what for prefix, what in _PREFIXES.items() if name.startswith(prefix)), "")


def refusal(name: str, value: str) -> tuple[str, str]:
    """(problem, remedy) for ``name=value`` in a spec's env, or ('', '') when it is allowed."""
    if _CMAKE_CODE.fullmatch(name):
        return f"{name} is refused: it makes CMake load code", _REMEDY["CMake load code"]
    if _CMAKE_ARG_VARS.fullmatch(name) and (code := _cmake_code_arg(value)):
        return f"{name} holds {code!r}, which makes CMake load code", _REMEDY["CMake load code"]
    what = family(name)
    if what:
        if what == "a tool load a configuration file or store it names":
            return f"{name} is refused: it makes {what}, in every process", _REMEDY[what]
        return f"{name} is refused: it makes {what} run or load code in every process", _REMEDY[what]
    if name in SEARCH_PATHS:
        bad = [entry for entry in value.split(":") if not entry.startswith("/")]
        if bad:
            shown = repr(bad[0]) if bad[0] else "an empty entry"
            return (
                f"search path {name} holds {shown}: only absolute directories (an empty or relative entry "
                "means the current directory)",
                "write absolute paths separated by ':'",
            )
    return "", ""


def _cmake_code_arg(value: str) -> str:
    """The first cmake argument in ``value`` that makes CMake load code ('' when none): ``-C file`` (a cache
    script), ``-P``, ``--toolchain``, ``-D`` of a variable ``_CMAKE_CODE`` names (any type, ``-D NAME``)."""
    try:
        words = shlex.split(value)
    except ValueError:
        words = value.split()
    for i, word in enumerate(words):
        if word in ("-C", "-P", "--toolchain") or (word.startswith(("-C", "--toolchain=")) and word != "-C"):
            return word
        define = words[i + 1] if word == "-D" and i + 1 < len(words) else word[2:] if word.startswith("-D") else ""
        if define and _CMAKE_CODE.fullmatch(define.partition("=")[0].partition(":")[0]):
            return word if word != "-D" else f"-D {define}"
    return ""
