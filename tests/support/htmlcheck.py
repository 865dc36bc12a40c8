"""report.html read back with html.parser: every start tag and the text, and the check that nothing
in it can run (no script element, no on* attribute, no javascript: link, ids of plain characters)."""
from __future__ import annotations

import re
from html.parser import HTMLParser

ID = re.compile(r"^[A-Za-z0-9_.-]+$")          # matplotlib's ids, prefixed by figure
ACTIVE = ("script", "iframe", "object", "embed", "foreignobject", "base", "meta-refresh")


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> Page:
    p = Page()
    p.feed(html)
    p.close()
    return p


def assert_no_script(page: Page) -> None:
    assert not [t for t, _ in page.tags if t in ACTIVE]
    for tag, attrs in page.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        assert not any("javascript:" in (v or "").lower() for k, v in attrs.items()
                       if k in ("href", "src", "xlink:href", "action")), attrs
        if "id" in attrs:
            assert ID.match(attrs["id"] or ""), (tag, attrs["id"])
        assert not (tag == "meta" and (attrs.get("http-equiv") or "").lower() == "refresh"), attrs
