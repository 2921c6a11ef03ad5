"""RunConfig: a run YAML as the SDK takes it. It is the spec model itself (a RunSpec, its
fields as in the YAML), loaded through the same path as `launcher run -f`: mcli's legacy
spellings, overrides, and errors placed at file:line: field."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import PrivateAttr

from launcher.errors import FieldError, SpecError
from launcher.sdk.exceptions import ValidationError
from launcher.spec.load import LoadedSpec, Overrides, load_spec, load_spec_text
from launcher.spec.models import RunSpec


class RunConfig(RunSpec):
    """A run's spec: name, image, command, compute, scheduling, ... as in the run YAML.
    Change its fields before create_run (`config.compute.gpus = 8`)."""

    _loaded: LoadedSpec | None = PrivateAttr(default=None)

    @classmethod
    def from_file(cls, path: str | Path, overrides: Overrides | None = None) -> RunConfig:
        """The run YAML at `path`; a bad one raises ValidationError naming file:line and field.
        The load's notes (a legacy spelling rewritten) are in `warnings`."""
        try:
            return cls._of(load_spec(path, overrides, model=cls))
        except SpecError as e:
            raise ValidationError.of(e) from None

    @classmethod
    def from_dict(cls, data: dict[str, Any], overrides: Overrides | None = None) -> RunConfig:
        """A run spec as a mapping, read as a YAML of the same fields would be."""
        import yaml

        try:
            return cls._of(load_spec_text(yaml.safe_dump(data, sort_keys=False), None, overrides, model=cls))
        except SpecError as e:
            # The lines are those of a YAML the user never saw: the field says where.
            raise ValidationError([replace(i, line=None, column=None) for i in e.issues], hint=e.hint) from None

    @classmethod
    def of(cls, config: RunConfig | RunSpec | dict[str, Any] | str | Path) -> RunConfig:
        """What create_run takes: a RunConfig, a RunSpec, a mapping, or the path of a YAML."""
        if isinstance(config, RunConfig):
            return config
        if isinstance(config, RunSpec):
            return cls.model_validate(dict(config))
        if isinstance(config, dict):
            return cls.from_dict(config)
        if isinstance(config, str | Path):
            return cls.from_file(config)
        raise TypeError(f"a run config is a RunConfig, a mapping or a YAML path, not {type(config).__name__}")

    @classmethod
    def _of(cls, loaded: LoadedSpec) -> RunConfig:
        config = loaded.spec  # validated as this class: one validator built, not RunSpec's too
        if not isinstance(config, cls):
            config = cls.model_validate(dict(loaded.spec))  # its fields are validated models already
        config._loaded = loaded
        return config

    @property
    def warnings(self) -> list[str]:
        """What loading it rewrote or noted (mcli's legacy spellings), in the CLI's words."""
        return list(self._loaded.warnings) if self._loaded else []

    @property
    def file(self) -> str | None:
        return self._loaded.file if self._loaded else None

    def check_recipe_parameters(self) -> None:
        """Where the command runs a built-in recipe (the MPT trainer, the HF recipe), what it
        would refuse in `parameters` when it starts, as a ValidationError placed at the lines."""
        from launcher.train.recipes import parameter_issues

        issues = parameter_issues(self, self._loaded)
        if issues:
            raise ValidationError(
                issues,
                hint="the command runs a built-in recipe, so `parameters` is its config (docs/training.md)",
            )

    def placed(self, e: FieldError) -> ValidationError:
        """A FieldError found after loading (a backend's check), placed at the field's line."""
        if self._loaded is not None:
            return ValidationError([self._loaded.issue(e.field, e.detail)], hint=e.hint)
        from launcher.errors import SpecIssue

        return ValidationError([SpecIssue(e.detail, field=e.field)], hint=e.hint)
