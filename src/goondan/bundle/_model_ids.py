"""The model ids a provider SDK knows, read from the installed SDK's own ``Literal`` of them.

``model: claude-sonet-4`` used to pass ``gdn validate`` and fail at the first request. The SDKs carry
their model lists as typing Literals (``anthropic.types.ModelParam``, ``openai.types.ChatModel``), so a
name missing from that list is worth a warning with a did-you-mean from it. Only a warning: providers
ship models faster than SDK releases, and proxies name models as they like.

The list is read from the SDK's source file with ``ast``, not by importing it and calling
``typing.get_args``: importing ``anthropic.types.model_param`` imports the whole ``anthropic`` package
(1.30 s measured with ``python -X importtime`` on 2026-11-24; ``openai.types.chat_model`` 0.58 s),
and ``gdn validate`` promises never to pay an SDK's import (see ``goondan.models._sdk``). Reading
and parsing the one file takes about a millisecond. ``importlib.util.find_spec`` of a top-level
package locates it without importing it. Whatever does not look as expected (another layout in a
future SDK, no Literal) gives no list, so no warning: the check can go quiet, never wrong.

``google-genai`` (checked: 3.4.0) ships no such list, so Gemini model ids are not checked.

**Which ids are worth a warning** (:func:`model_id_problem`). Not every id missing from the list:
SDK releases drop ids that the API still serves (anthropic 2.12.0 lists neither ``claude-opus-4-1``
nor ``claude-3-7-sonnet-latest``; openai leaves out dated snapshots), and warning about those made
``gdn validate --strict`` fail bundles that run. The list is used as a vocabulary instead: an id is
cut at ``-`` into words (digits and dots dropped: ``4o`` -> ``o``, ``20250929`` -> nothing), and an
id made only of the provider's own words (plus ``latest``/``preview``) is a plausible member of a
known family and passes. A warning is kept for what is almost surely a mistake:

- a word that is one typo from a known one (``sonet``, ``mnii``, ``claud``): did-you-mean the id
  with that word corrected (or the nearest listed id);
- a first word the provider never uses (``gpt-4o`` under anthropic, ``llama3`` under openai without
  ``endpoint``), naming the provider whose family it is when there is one;
- a style the provider never uses: upper case anywhere, or dots where every listed id of the
  provider uses dashes (``claude-3.5-sonnet``).

A new family (``claude-nova-6``: an unknown word close to none) passes. OpenAI fine-tunes
(``ft:...``) are never checked.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

#: provider -> (top-level package, file inside it, name of the Literal type alias). openai: the chat
#: models, since the adapter calls chat.completions (responses-only models fail there).
SDK_MODEL_LISTS: dict[str, tuple[str, str, str]] = {
    "anthropic": ("anthropic", "types/model_param.py", "ModelParam"),
    "openai": ("openai", "types/shared/chat_model.py", "ChatModel"),
}

#: provider -> environment variable its SDK takes a base URL from when the client is given none
BASE_URL_VARIABLES: dict[str, str] = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}


@dataclass(frozen=True)
class SdkModels:
    package: str
    version: str
    names: tuple[str, ...]  # in the SDK's order (newest first in both SDKs)


def _literal_strings(node: ast.expr) -> list[str]:
    """Every string inside ``Literal[...]`` subscripts of ``node`` (``Union[Literal[...], str]`` too)."""
    out: list[str] = []
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Subscript):
            continue
        head = sub.value
        name = head.id if isinstance(head, ast.Name) else head.attr if isinstance(head, ast.Attribute) else ""
        if name != "Literal":
            continue
        items = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        out.extend(i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str))
    return out


@functools.cache
def sdk_models(provider: str) -> SdkModels | None:
    """The model ids the installed SDK of ``provider`` lists, or None (no SDK, no list, unreadable)."""
    where = SDK_MODEL_LISTS.get(provider)
    if where is None:
        return None
    package, relative, alias = where
    try:
        spec = importlib.util.find_spec(package)
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if not locations:
            return None
        tree = ast.parse((Path(locations[0]) / relative).read_bytes())
        version = importlib.metadata.version(package)
    except (ImportError, ValueError, OSError, SyntaxError, importlib.metadata.PackageNotFoundError):
        return None
    for stmt in tree.body:
        target: ast.expr | None = stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == alias and value is not None:
            names = tuple(dict.fromkeys(_literal_strings(value)))
            return SdkModels(package, version, names) if names else None
    return None


#: the first words of each provider's model ids, beside what its SDK lists: for "is it another
#: provider's model?" (google: its SDK ships no list to read them from)
FAMILIES: dict[str, tuple[str, ...]] = {
    "anthropic": ("claude",),
    "openai": ("gpt", "o", "chatgpt", "codex"),
    "google": ("gemini", "gemma"),
}
#: words any provider may add to a family's id
_COMMON_WORDS = frozenset({"", "latest", "preview"})


@dataclass(frozen=True)
class ModelIdProblem:
    """Why an id is worth a warning, and the id the user most likely meant (None: no guess)."""

    reason: str
    meant: str | None


def _word(token: str) -> str:
    return "".join(ch for ch in token if not (ch.isdigit() or ch == "."))


def _slips(a: str, b: str) -> int:
    """Edits from ``a`` to ``b``, a swap of two neighbours counting as one (optimal string alignment)."""
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(rows[i - 1][j] + 1, row[j - 1] + 1, rows[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[i - 2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def _near(word: str, vocabulary: set[str]) -> str | None:
    """The known word ``word`` is one slip from (a letter missing, extra, wrong or swapped), for
    words of 3 letters or more: ``research`` is two from ``search`` and stays a word of its own."""
    if len(word) < 3:
        return None
    close = sorted((k for k in vocabulary if len(k) >= 3 and _slips(word, k) == 1), key=lambda k: (len(k), k))
    return close[0] if close else None


def model_id_problem(provider: str, model: str, known: SdkModels) -> ModelIdProblem | None:
    """None for an id in the list or one that reads like the provider's naming; otherwise why it
    looks like a mistake (rules in this module's docstring)."""
    if model in known.names or model.startswith("ft:"):
        return None
    names = known.names
    if model != model.lower() and not any(n != n.lower() for n in names):
        return ModelIdProblem(f"{provider} model ids are lower case", model.lower())
    if "." in model and not any("." in n for n in names):
        return ModelIdProblem(f"{provider} model ids use '-' between version numbers", model.replace(".", "-"))
    tokens = model.split("-")
    firsts = {_word(n.split("-")[0]) for n in names} | set(FAMILIES.get(provider, ()))
    vocabulary = {_word(t) for n in names for t in n.split("-")} | _COMMON_WORDS | firsts
    corrected: list[str] | None = list(tokens)
    typo = False
    for i, token in enumerate(tokens):
        word = _word(token)
        if word in (firsts if i == 0 else vocabulary):
            continue
        near = _near(word, firsts if i == 0 else vocabulary)
        if near is not None:
            typo = True
            if corrected is not None:  # the word in one piece inside the token: correct it in place
                corrected[i] = token.replace(word, near, 1) if word in token else ""
                corrected = corrected if corrected[i] else None
        elif i == 0:
            owner = next((p for p, words in FAMILIES.items() if p != provider and word in words), None)
            reason = (
                f"it does not look like an id of provider {provider} (theirs start with {', '.join(sorted(firsts))})"
            )
            if owner is not None:
                reason += f"; {tokens[0]!r} names {owner} models: is `provider: {owner}` meant?"
            return ModelIdProblem(reason, _nearest(model, names))
    if not typo:
        return None  # the provider's own words: a model the SDK no longer (or not yet) lists
    guess = "-".join(corrected) if corrected is not None else _nearest(model, names)
    return ModelIdProblem(f"it looks like a misspelt {provider} model id", guess)


def _nearest(model: str, names: tuple[str, ...]) -> str | None:
    close = difflib.get_close_matches(model, names, n=1, cutoff=0.6)
    return close[0] if close else None


__all__ = [
    "BASE_URL_VARIABLES",
    "FAMILIES",
    "SDK_MODEL_LISTS",
    "ModelIdProblem",
    "SdkModels",
    "model_id_problem",
    "sdk_models",
]
