"""An mkdocs hook: the run spec's field reference, generated from the pydantic models of
launcher/spec/models.py each time the site is built, so the page cannot lag the code.

A page asks for it with the line `<!-- run-spec-reference -->`; the hook replaces that line
with one table per model reachable from RunSpec (its docstring, then each field's YAML name,
type, default and bounds). A page that names the marker while RunSpec cannot be imported
fails the build (mkdocs reports the hook's exception), never renders an empty reference."""

from __future__ import annotations

import enum
import inspect
import types
import typing

MARKER = "<!-- run-spec-reference -->"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER not in markdown:
        return markdown
    from launcher.spec.models import RunSpec

    return markdown.replace(MARKER, render_reference(RunSpec))


def render_reference(root) -> str:
    """Markdown for `root` and every model its fields reach, in the order they are reached."""
    sections = []
    for model in reachable_models(root):
        doc = inspect.cleandoc(model.__doc__ or "").strip()
        # pydantic gives a model without a docstring BaseModel's own; that one says nothing here.
        if doc.startswith(("Usage docs:", "!!! abstract")):
            doc = ""
        rows = ["| field | type | default | bounds |", "| --- | --- | --- | --- |"]
        for name, field in model.model_fields.items():
            if field.exclude:
                continue
            shown = field.alias or name
            rows.append(
                f"| `{shown}` | {cell(type_name(field.annotation))} | {cell(default_of(field))} "
                f"| {cell(bounds_of(field))} |"
            )
        heading = "`" + ("run spec" if model is root else model.__name__) + "`"
        sections.append(
            "\n\n".join(part for part in (f"### {heading} {{#{anchor(model)}}}", doc, "\n".join(rows)) if part)
        )
    return "\n\n".join(sections) + "\n"


def reachable_models(root) -> list:
    seen: list = []

    def visit(model) -> None:
        if model in seen:
            return
        seen.append(model)
        for field in model.model_fields.values():
            for inner in models_in(field.annotation):
                visit(inner)

    visit(root)
    return seen


def models_in(annotation) -> list:
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found = []
    for arg in typing.get_args(annotation):
        found.extend(models_in(arg))
    return found


def type_name(annotation) -> str:
    from pydantic import BaseModel

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in args)
    if origin in (list, tuple, set):
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {type_name(args[0])} to {type_name(args[1])}" if args else "mapping"
    if annotation is type(None):
        return "null"
    if annotation is typing.Any:
        return "any"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{anchor(annotation)})"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " or ".join(repr(m.value) for m in annotation)
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation).replace("typing.", "")


def default_of(field) -> str:
    from pydantic_core import PydanticUndefined

    if field.is_required():
        return "required"
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:  # a factory that takes the validated data
            return "computed"
        return "empty" if value in ({}, [], "") else "its defaults"
    if field.default is PydanticUndefined or field.default is None:
        return "none"
    value = field.default.value if isinstance(field.default, enum.Enum) else field.default
    if isinstance(value, bool):  # as a run YAML spells it
        return f"`{str(value).lower()}`"
    return f"`{value!r}`" if not isinstance(value, str) else f"`{value}`"


def bounds_of(field) -> str:
    words = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    found = []
    for item in field.metadata:
        for attr, sign in words.items():
            if getattr(item, attr, None) is not None:
                found.append(f"{sign} {getattr(item, attr)}")
        if getattr(item, "strict", None):
            found.append("strict")
    for arg in typing.get_args(field.annotation):  # Annotated[int, Field(ge=0)] | None
        if typing.get_origin(arg) is typing.Annotated:
            for item in typing.get_args(arg)[1:]:
                for meta in getattr(item, "metadata", [item]):
                    for attr, sign in words.items():
                        if getattr(meta, attr, None) is not None:
                            found.append(f"{sign} {getattr(meta, attr)}")
                    if getattr(meta, "strict", None):
                        found.append("strict")
    return ", ".join(dict.fromkeys(found))


def anchor(model) -> str:
    return "spec-" + model.__name__.lower()


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
