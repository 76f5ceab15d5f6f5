"""The one exception type library code raises for problems the user can fix."""


class UserError(Exception):
    """A problem with the user's input or environment, with advice on the fix.

    The CLI prints ``message`` (and ``hint`` when given) and exits non-zero;
    it never shows a traceback for these.
    """

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"
