"""The README and docs/ link only to files and headings that exist, so moving a section cannot
leave a reader at a dead end. GitHub's anchor rule: lower-case, punctuation dropped except '-' and
'_', spaces to '-'."""
import re

from support.paths import ROOT

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")


def anchors(text: str) -> set[str]:
    out = set()
    for line in FENCE.sub("", text).splitlines():
        m = re.match(r"^#{1,6} (.+)$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug)
    return out


def pages():
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "results" / "README.md"]


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for page in pages():
        text = page.read_text()
        for target in LINK.findall(CODE.sub("", FENCE.sub("", text))):
            if re.match(r"^[a-z]+:", target):
                continue                                        # http(s), mailto: not checked offline
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no heading #{anchor})")
    assert broken == []


def test_the_readme_fits_two_screens():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
