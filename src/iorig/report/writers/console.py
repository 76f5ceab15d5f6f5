"""The one kind of console iorig prints through: rich's, with every text
shown as ``visible`` makes it. A label, title, path, phase name or message
from outside may hold what a terminal would act on (ESC sequences that
clear the screen or plant a link, CR and backspace that overwrite, C1
controls, text-direction overrides); whatever the renderable — a table, a
heading, a progress line, an error — its text reaches the output as
escapes (``\\x1b``, ``\\u202e``), under a terminal and in a pipe alike.

Cells and one-line headings are made visible where they are built
(``terminal.clip``, ``tables.to_rich``), so that tables are measured on what
is shown and a newline cannot start a forged line; this console is what
guarantees that nothing else gets through."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Span, Text

from iorig.untrusted import first_unsafe, visible


def visible_text(text: Text) -> Text:
    """``text`` with its characters shown as ``visible`` shows them (newlines
    kept: a Text of several lines is one by design), styles on the same
    characters."""
    plain = text.plain
    if first_unsafe(plain, allow="\n") is None:
        return text
    starts, parts, at = [], [], 0
    for char in plain:  # where each character starts once escaped
        shown = visible(char, lines=True)
        starts.append(at)
        parts.append(shown)
        at += len(shown)
    starts.append(at)
    out = Text(
        "".join(parts),
        style=text.style,
        justify=text.justify,
        overflow=text.overflow,
        no_wrap=text.no_wrap,
        end=text.end,
        tab_size=text.tab_size,
    )
    out.spans = [Span(starts[s.start], starts[s.end], s.style) for s in text.spans]
    return out


class SafeConsole(Console):
    """A rich Console that shows every text it renders visibly (never
    highlighted: user text is not re-styled either)."""

    def __init__(self, *, unwrapped_in_pipe: bool = False, **kwargs: Any) -> None:
        super().__init__(highlight=False, **kwargs)
        self._unwrapped_in_pipe = unwrapped_in_pipe

    def print(self, *objects: Any, **kwargs: Any) -> None:
        # the command line's own consoles: into a pipe or a file, a line of
        # prose stays one line (wrapped at 80 columns it split the commands
        # iorig suggests, `iorig compare A⏎B`, for whoever copies or greps
        # them); a terminal wraps prose at words. Asked at each print: what
        # the output is may be known only then (tests, a redirected stdout)
        if self._unwrapped_in_pipe and "soft_wrap" not in kwargs and not self.is_terminal:
            kwargs["soft_wrap"] = True
        super().print(*objects, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        # markup of iorig's own messages is parsed first, then what it holds is shown
        return visible_text(super().render_str(text, **kwargs))

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        if isinstance(renderable, Text):
            renderable = visible_text(renderable)
        for segment in super().render(renderable, options):
            # rich's own cursor movements are control segments; any other
            # text that came some other way is made visible here
            if segment.control is None and first_unsafe(segment.text, allow="\n"):
                yield Segment(visible(segment.text, lines=True), segment.style)
            else:
                yield segment
