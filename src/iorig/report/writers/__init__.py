"""How it is written: the terminal (rich), text, Markdown, JSON and CSV,
and the self-contained HTML report and full-disclosure page."""
