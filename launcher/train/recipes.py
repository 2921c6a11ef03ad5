"""Which built-in recipe a run's command runs, and its `parameters` checked against that
recipe's own config before the run is submitted (`validate`, `run --dry-run`, `run`, the
SDK's create_run), so that a misspelt key is an error at the user's spec file:line rather
than at /mnt/config/parameters.yaml inside a started run.

A command runs a recipe where one of its simple commands (split at newlines, `;`, `&&`,
`||`, `|`) is `... -m launcher.train $PARAMETERS` (python, composer or torchrun), `... -m
launcher.train.hf $PARAMETERS`, or `launcher train [-n N] $PARAMETERS` (also as `python -m
launcher train`), followed by the
recipe's own `path.to.key=VALUE` overrides, which are applied as the recipe applies them. A
recipe given another config file than $PARAMETERS does not read the spec's parameters, and
any other command's parameters are free-form: neither is checked.

What the recipe fills in when it starts (an empty dataset.remote or data.path from
DATA_REMOTE, `{run_name}`) is not checked here: only the config model (its fields, types and
rules) and the `${...}` references, resolved as the recipe resolves them. An override whose
value the shell fills in (`lr=$LR`) is not known offline: errors under its path are left to
the recipe.

Only pydantic models are imported: the check needs no torch, composer or transformers.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError, create_model

from launcher.errors import SpecIssue
from launcher.spec.issues import validation_issues
from launcher.spec.load import LoadedSpec
from launcher.spec.models import RunSpec


def _mpt_config() -> type[BaseModel]:
    from launcher.train.config import TrainConfig

    return TrainConfig


def _hf_config() -> type[BaseModel]:
    from launcher.train.hf.config import HFConfig

    return HFConfig


@dataclass(frozen=True)
class Recipe:
    name: str
    """How messages name it."""
    config: Callable[[], type[BaseModel]]
    """Its config model (imported on first use)."""


MPT = Recipe("the MPT trainer (launcher.train)", _mpt_config)
HF = Recipe("the HF recipe (launcher.train.hf)", _hf_config)
MODULES = {"launcher.train": MPT, "launcher.train.hf": HF}
"""`python -m MODULE`: the recipes' runnable modules."""

PARAMETERS_REFS = ("$PARAMETERS", "${PARAMETERS}")
# `launcher train`'s own options that take a value (launcher.cli.train).
_TRAIN_VALUE_OPTIONS = ("-n", "--nproc")
_OPERATOR = re.compile(r"^[;&|()<>]+$")


@dataclass(frozen=True)
class RecipeCall:
    """One run of a recipe in a command: which, and the overrides after $PARAMETERS."""

    recipe: Recipe
    overrides: tuple[str, ...]


def recipe_calls(command: str) -> list[RecipeCall]:
    """The built-in recipes `command` runs on the spec's parameters, in order."""
    calls = []
    for words in _simple_commands(command):
        call = _recipe_call(words)
        if call is not None:
            calls.append(call)
    return calls


def _simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command, as the shell would split them (quotes removed).
    A line shlex cannot split (an open quote, a heredoc's text) is skipped: such a line is
    not one of the recipe command lines this module recognises."""
    out: list[list[str]] = []
    for line in command.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:
            continue
        words: list[str] = []
        for token in tokens:
            if _OPERATOR.match(token):
                if words:
                    out.append(words)
                words = []
            else:
                words.append(token)
        if words:
            out.append(words)
    return out


def _recipe_call(words: list[str]) -> RecipeCall | None:
    for i, word in enumerate(words[:-1]):
        if word == "-m" and words[i + 1] in MODULES:
            return _with_parameters(MODULES[words[i + 1]], words[i + 2 :])
        # The word after `launcher` (or `python -m launcher`): the CLI's subcommand.
        if word == "launcher" or word.endswith("/launcher"):
            subcommand = i + 1
        elif word == "-m" and words[i + 1] == "launcher":
            subcommand = i + 2
        else:
            continue
        if words[subcommand : subcommand + 1] == ["train"]:
            args = words[subcommand + 1 :]
            while args and args[0].startswith("-"):
                option = args.pop(0)
                if option in _TRAIN_VALUE_OPTIONS and args:
                    args.pop(0)
            return _with_parameters(MPT, args)
    return None


def _with_parameters(recipe: Recipe, args: list[str]) -> RecipeCall | None:
    if not args or args[0] not in PARAMETERS_REFS:
        return None  # another config file than the spec's parameters
    overrides = []
    for arg in args[1:]:
        if "=" not in arg or arg.startswith("-"):
            break
        overrides.append(arg)
    return RecipeCall(recipe, tuple(overrides))


@functools.cache
def _in_parameters(config: type[BaseModel]) -> type[BaseModel]:
    """A model of {parameters: config}: its errors' paths and did-you-means read as the
    spec's (parameters.optimizer.lr, `parameters takes: ...`)."""
    return create_model(f"ParametersOf{config.__name__}", parameters=(config, ...))


def parameter_issues(spec: RunSpec, loaded: LoadedSpec | None) -> list[SpecIssue]:
    """What each built-in recipe that `spec.command` runs would refuse in `spec.parameters`,
    placed where `loaded` (the spec as loaded, None for one built in code) has each field:
    at its line in the file, at the --set flag that set it, or at the command's line for the
    command's own overrides."""
    from launcher.train.config import apply_overrides
    from launcher.train.interp import InterpolationError, interpolate

    def place(path: tuple, at: tuple, message: str, key: bool) -> SpecIssue:
        if loaded is None:
            return SpecIssue(message, field=".".join(str(p) for p in path))
        issue = loaded.issue_at(path, at, message, key)
        if issue.file is None:  # a spec given as a mapping: its lines are of a YAML the user never saw
            return dataclasses.replace(issue, line=None, column=None)
        return issue

    issues: list[SpecIssue] = []
    for call in recipe_calls(spec.command):
        original = spec.parameters_for_file()
        data = copy.deepcopy(original)
        try:
            from_command = apply_overrides(data, call.overrides)
        except ValueError as e:
            issues.append(place(("command",), ("command",), f"{call.recipe.name}: {e}", False))
            continue
        filled_by_shell = [p for p, item in from_command.items() if "$" in item or "`" in item]

        def make(
            path: tuple, at: tuple, message: str, key: bool, from_command=from_command, original=original
        ) -> SpecIssue:
            inner = path[1:]
            item = next((v for p, v in from_command.items() if _set_by(inner, p, original)), None)
            if item is not None:  # the command's own override: point at the command
                return place(path, ("command",), f"{message} (set by the command's {item})", False)
            return place(path, at, message, key)

        try:
            resolved = interpolate(data)
        except InterpolationError as e:
            issues.append(make(("parameters", *e.path), ("parameters", *e.path), e.message, False))
            continue
        model = _in_parameters(call.recipe.config())
        try:
            model.model_validate({"parameters": resolved})
        except ValidationError as e:
            found = validation_issues(e, model, {"parameters": resolved}, make, what="the run spec")
            issues += [i for i in found if not any(_set_by(_inner(i.field), p, original) for p in filled_by_shell)]
    return issues


def _inner(dotted: str) -> tuple[str, ...]:
    """A field's path inside `parameters` (parameters.optimizer.lr -> optimizer, lr)."""
    return tuple(dotted.split("."))[1:]


def _set_by(path: tuple, set_path: tuple, original: Any) -> bool:
    """Is `path` what an override of `set_path` set, inside it, or a mapping it created
    (`optimizr.lr=1` makes `optimizr`, which `original`, the spec's parameters, lacks)?"""
    if path[: len(set_path)] == set_path:
        return True
    if set_path[: len(path)] != path:
        return False
    node = original
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and str(part).isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return True
    return False
