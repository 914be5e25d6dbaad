#!/usr/bin/env python3
"""Checks the links of README.md and the book (docs/src).

    python3 scripts/check-docs.py

- Every relative link and image (inline, reference-style and HTML `href`/`src`)
  in README.md and docs/src/**/*.md points at a file or directory that exists.
  Links from a book page stay inside docs/src, since mdBook serves nothing else.
- Every `#anchor`, in the same page or on another Markdown page, names a heading
  of that page, with the ids mdBook gives headings: the heading's text,
  lowercased, whitespace to '-', every character but letters, digits, '-' and
  '_' dropped; a repeated id gets -1, -2, ... in order.
- Every page under docs/src is listed in docs/src/SUMMARY.md, and every entry
  there exists.

http(s) and mailto links are not checked. Exits 1 with the list of problems,
one `file:line: message` per line. Standard library only.
"""

import html
import re
import sys
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
BOOK_SRC = ROOT / "docs" / "src"
SUMMARY = BOOK_SRC / "SUMMARY.md"

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
# [text](dest "title") and ![alt](dest); text may hold one level of brackets.
INLINE_LINK = re.compile(
    r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
REF_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:[ \t]*(<[^>]*>|\S+)")
HTML_ATTR = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*(\"[^\"]*\"|'[^']*')", re.I)
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
IGNORED_SCHEMES = ("http:", "https:", "mailto:")
CUSTOM_ID = re.compile(r"\s*\{#([^}\s]+)[^}]*\}\s*$")


def blank(text):
    """The same text with every character but newlines made a space, so
    offsets and line numbers stay put."""
    return re.sub(r"[^\n]", " ", text)


def strip_code(text):
    """The page with fenced code blocks, HTML comments and code spans blanked:
    what is left is where links can be."""
    out = []
    fence = None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            out.append("")
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and line.strip() == m.group(1):
                fence = None
            out.append("")
        else:
            out.append(line)
    prose = "\n".join(out)
    prose = HTML_COMMENT.sub(lambda m: blank(m.group(0)), prose)
    return CODE_SPAN.sub(lambda m: blank(m.group(0)), prose)


def heading_text(raw):
    """The text mdBook renders for a heading's Markdown source: code spans keep
    their content, links and images their text, emphasis and tags go."""
    parts = []
    pos = 0
    for m in CODE_SPAN.finditer(raw):
        parts.append(("md", raw[pos:m.start()]))
        parts.append(("code", m.group(2)))
        pos = m.end()
    parts.append(("md", raw[pos:]))
    text = []
    for kind, s in parts:
        if kind == "code":
            text.append(s)
            continue
        s = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", s)
        s = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\[[^\]]*\]", r"\1", s)
        s = re.sub(r"<[^>]+>", "", s)
        s = re.sub(r"\*+", "", s)
        s = re.sub(r"(?<![0-9A-Za-z])_+|_+(?![0-9A-Za-z])", "", s)
        s = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", s)
        text.append(html.unescape(s))
    return "".join(text)


def heading_id(text):
    """mdBook's id for a heading's text (mdbook-html's id_from_content)."""
    out = []
    for ch in text.strip().lower():
        if ch.isalnum() or ch in "_-":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


class Page:
    def __init__(self, path):
        self.path = path
        self.text = path.read_text(encoding="utf-8")
        self.prose = strip_code(self.text)
        self.anchors = self._anchors()

    def _anchors(self):
        """The ids mdBook gives this page's headings. Headings are found in the
        prose (so none inside a code block counts) and read from the source (so
        their code spans keep their text)."""
        used = set()
        prose = self.prose.split("\n")
        source = self.text.split("\n")
        for i, line in enumerate(prose):
            m = ATX.match(line)
            if m:
                raw = ATX.match(source[i]).group(2) or ""
            elif i > 0 and SETEXT.match(line) and prose[i - 1].strip() \
                    and not re.match(r"^ {0,3}([-*+>|#]|\d+[.)])", prose[i - 1]) \
                    and not SETEXT.match(prose[i - 1]):
                raw = source[i - 1].strip()
            else:
                continue
            custom = CUSTOM_ID.search(raw)
            ident = custom.group(1) if custom else heading_id(heading_text(raw))
            if ident in used:
                n = 1
                while f"{ident}-{n}" in used:
                    n += 1
                ident = f"{ident}-{n}"
            used.add(ident)
        return used

    def line_of(self, offset):
        return self.text.count("\n", 0, offset) + 1

    def links(self):
        """(line, kind, destination) for every link, image and reference
        definition outside code."""
        found = []
        for m in INLINE_LINK.finditer(self.prose):
            kind = "image" if m.group(1) else "link"
            found.append((self.line_of(m.start()), kind, m.group(3)))
        for i, line in enumerate(self.prose.split("\n"), start=1):
            m = REF_DEF.match(line)
            if m:
                found.append((i, "reference", m.group(2)))
        for m in HTML_ATTR.finditer(self.prose):
            found.append((self.line_of(m.start()), "html", m.group(1)[1:-1]))
        return [(line, kind, dest.strip("<>")) for line, kind, dest in found]


def rel(path):
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def main():
    problems = []
    pages = {}

    def page(path):
        path = path.resolve()
        if path not in pages:
            pages[path] = Page(path)
        return pages[path]

    sources = [ROOT / "README.md"] + sorted(BOOK_SRC.rglob("*.md"))
    checked_links = 0
    checked_anchors = 0
    for source in sources:
        src = page(source)
        in_book = BOOK_SRC in source.resolve().parents
        for line, kind, dest in src.links():
            where = f"{rel(source)}:{line}"
            if dest.lower().startswith(IGNORED_SCHEMES):
                continue
            if SCHEME.match(dest):
                problems.append(f"{where}: {kind} {dest!r} has a scheme this check does not follow")
                continue
            checked_links += 1
            path_part, _, fragment = dest.partition("#")
            path_part = unquote(path_part.split("?", 1)[0])
            if not path_part and not _:
                if source.resolve() != SUMMARY.resolve():  # reported below, as a draft chapter
                    problems.append(f"{where}: {kind} with an empty destination")
                continue
            if path_part.startswith("/"):
                problems.append(f"{where}: {kind} {dest!r} is absolute; use a path relative to the page")
                continue
            target = (source.parent / path_part).resolve() if path_part else source.resolve()
            if not target.exists():
                problems.append(f"{where}: {kind} {dest!r}: {rel(target)} does not exist")
                continue
            if in_book and BOOK_SRC.resolve() not in [target, *target.parents]:
                problems.append(
                    f"{where}: {kind} {dest!r} leaves docs/src, which the built book does not hold; "
                    "name the path as code text instead")
                continue
            if _:
                checked_anchors += 1
                fragment = unquote(fragment)
                if not fragment:
                    problems.append(f"{where}: {kind} {dest!r} has an empty anchor")
                elif target.is_dir() or target.suffix.lower() != ".md":
                    problems.append(f"{where}: {kind} {dest!r}: an anchor on a file that is not Markdown")
                elif fragment not in page(target).anchors:
                    near = sorted(a for a in page(target).anchors if fragment[:6] in a)[:5]
                    hint = f" (headings near it: {', '.join('#' + a for a in near)})" if near else ""
                    problems.append(f"{where}: {kind} {dest!r}: {rel(target)} has no heading "
                                    f"#{fragment}{hint}")

    # The book's table of contents: every entry exists, every page is listed.
    listed = {}
    if not SUMMARY.exists():
        problems.append(f"{rel(SUMMARY)}: missing")
    else:
        summary = page(SUMMARY)
        for line, kind, dest in summary.links():
            if kind != "link":
                continue
            path_part = unquote(dest.partition("#")[0])
            where = f"{rel(SUMMARY)}:{line}"
            if not path_part:
                problems.append(f"{where}: entry without a page (a draft chapter)")
                continue
            target = (BOOK_SRC / path_part).resolve()
            if target in listed:
                problems.append(f"{where}: {path_part} is listed twice (first on line {listed[target]})")
            listed.setdefault(target, line)
        for md in sorted(BOOK_SRC.rglob("*.md")):
            if md.resolve() == SUMMARY.resolve():
                continue
            if md.resolve() not in listed:
                problems.append(f"{rel(md)}: not listed in {rel(SUMMARY)}, so the book does not show it")

    if problems:
        print(f"check-docs: {len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print(f"check-docs: {len(sources)} pages, {checked_links} links and images, "
          f"{checked_anchors} anchors, {len(listed)} SUMMARY entries: all good")
    return 0


if __name__ == "__main__":
    sys.exit(main())
