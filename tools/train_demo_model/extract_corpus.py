#!/usr/bin/env python3
"""Builds the demo model's training corpus from three Debian packages, as plain English text.

  r-cran-janeaustenr  Jane Austen's six novels (Project Gutenberg texts, public domain; package MIT)
  bible-kjv-text      the King James Bible (public domain; read with the `bible` program of bible-kjv)
  python3.11-doc      the Python 3.11 documentation, info edition (PSF License 2.0)

Each source is cut into documents (a chapter, a Bible chapter, a documentation node); a seeded draw
puts about 2.5% of the documents in the validation split, so validation text is never trained on.
Writes <out>/docs.jsonl (one document a line: source, title, split, text) and <out>/manifest.json
(each package's version, sha256, license and the exact byte counts of the text taken from it).

Usage: extract_corpus.py --out build/demo_model/corpus [--debs DIR] [--seed 12]
"""
import argparse
import gzip
import hashlib
import json
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

PACKAGES = {
    # name: (version the committed model was trained on, license of the text)
    "r-cran-janeaustenr": ("1.0.0-1", "novels public domain (Project Gutenberg); package MIT"),
    "bible-kjv-text": ("4.38", "King James Version text public domain; package unrestricted use"),
    "python3.11-doc": ("3.11.2-6+deb12u9", "PSF License Version 2 (Python documentation)"),
}
VAL_FRACTION = 0.025

KJV_BOOKS = [
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
    "1 Samuel", "2 Samuel", "1 Kings", "2 Kings", "1 Chronicles", "2 Chronicles", "Ezra",
    "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon", "Isaiah",
    "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos", "Obadiah", "Jonah",
    "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah", "Malachi", "Matthew", "Mark",
    "Luke", "John", "Acts", "Romans", "1 Corinthians", "2 Corinthians", "Galatians", "Ephesians",
    "Philippians", "Colossians", "1 Thessalonians", "2 Thessalonians", "1 Timothy", "2 Timothy",
    "Titus", "Philemon", "Hebrews", "James", "1 Peter", "2 Peter", "1 John", "2 John", "3 John",
    "Jude", "Revelation",
]
# Top-level parts of the Python documentation that are prose about the language. The changelog (a
# list of issue numbers and one-line summaries), licenses, legacy manuals and indices are left out.
PYDOC_PARTS = {
    "What’s New in Python", "The Python Tutorial", "Python Setup and Usage",
    "The Python Language Reference", "The Python Standard Library",
    "Extending and Embedding the Python Interpreter", "Python/C API Reference Manual",
    "Python HOWTOs", "Python Frequently Asked Questions", "Glossary",
}
PYDOC_SKIP = {"Changelog"}


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def fetch_debs(debs_dir):
    """apt-get download of the pinned versions (falling back to the current one, recorded)."""
    debs_dir.mkdir(parents=True, exist_ok=True)
    found = {}
    for name, (version, _) in PACKAGES.items():
        have = sorted(debs_dir.glob(f"{name}_*.deb"))
        if not have:
            for spec in (f"{name}={version}", name):
                if subprocess.run(["apt-get", "download", spec], cwd=debs_dir).returncode == 0:
                    break
            else:
                sys.exit(f"extract_corpus: cannot download {name} (run apt-get update first)")
            have = sorted(debs_dir.glob(f"{name}_*.deb"))
        deb = have[-1]
        got = deb.name.split("_")[1].replace("%2b", "+").replace("%3a", ":")
        if got != version.replace(":", "%3a"):
            print(f"warning: {name} {got} is not the {version} the committed model used",
                  file=sys.stderr)
        found[name] = (deb, got)
    return found


def unpack(deb, into):
    subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], check=True)


def reflow(paragraph_lines):
    """Joins a hard-wrapped prose paragraph into one line."""
    return re.sub(r"\s+", " ", " ".join(l.strip() for l in paragraph_lines)).strip()


def paragraphs(lines):
    block = []
    for line in lines + [""]:
        if line.strip():
            block.append(line)
        elif block:
            yield block
            block = []


# ---- Jane Austen -------------------------------------------------------------------------------
def austen_documents(root):
    import rdata  # PyPI: reads R's serialization format

    data = root / "usr/lib/R/site-library/janeaustenr/data"
    index = rdata.conversion.convert(
        rdata.parser.parse_data(gzip.decompress((data / "Rdata.rdx").read_bytes())))
    rdb = (data / "Rdata.rdb").read_bytes()
    docs = []
    # R's lazy-load database: per object, a 4-byte big-endian length and a zlib stream of an RDS.
    for name, (offset, length) in sorted(index["variables"].items(), key=lambda kv: int(kv[1][0])):
        blob = rdb[int(offset):int(offset) + int(length)]
        size = struct.unpack(">I", blob[:4])[0]
        raw = zlib.decompress(blob[4:])
        if len(raw) != size:
            sys.exit(f"extract_corpus: janeaustenr object {name}: {len(raw)} bytes, expected {size}")
        lines = [str(s) if s is not None else "" for s in rdata.conversion.convert(
            rdata.parser.parse_data(raw, expand_altrep=True))]
        chapter, title = [], f"{name}: front matter"
        for block in paragraphs(lines):
            text = reflow(block)
            if re.fullmatch(r"(CHAPTER|Chapter) [0-9IVXLC]+\.?", text):
                if chapter:
                    docs.append((f"{name}: {title}", "\n\n".join(chapter)))
                chapter, title = [], text
            chapter.append(text)
        docs.append((f"{name}: {title}", "\n\n".join(chapter)))
    return docs


# ---- King James Bible --------------------------------------------------------------------------
def kjv_documents(root):
    if shutil.which("bible") is None:
        subprocess.run(["apt-get", "install", "-y", "-q", "bible-kjv"], check=True)
    out = subprocess.run(["bible", "-p", str(root / "usr/lib"), "-f", "gen1:1-rev22:21"],
                         check=True, capture_output=True, text=True).stdout
    docs, book, key, verses = [], -1, None, []
    last_abbrev = None
    for line in out.splitlines():
        m = re.fullmatch(r"(\S+?)(\d+):(\d+) (.*)", line)
        if not m:
            sys.exit(f"extract_corpus: unexpected line from bible: {line[:80]!r}")
        abbrev, chap, text = m.group(1), int(m.group(2)), m.group(4).strip()
        if abbrev != last_abbrev:
            book, last_abbrev = book + 1, abbrev
        if (book, chap) != key:
            if verses:
                docs.append((f"{KJV_BOOKS[key[0]]} {key[1]}", "\n".join(verses)))
            key, verses = (book, chap), [f"{KJV_BOOKS[book]} {chap}\n"]
        verses.append(text)
    docs.append((f"{KJV_BOOKS[key[0]]} {key[1]}", "\n".join(verses)))
    if book != 65 or len(docs) != 1189:
        sys.exit(f"extract_corpus: expected 66 books and 1189 chapters, got {book + 1}, {len(docs)}")
    return docs


# ---- Python documentation ----------------------------------------------------------------------
NOTE_REF = re.compile(r"\*[Nn]ote\s+([^:*]+?)::|\*[Nn]ote\s+([^:*]+?):\s+[^\s.,:]+[.,]")
QUOTED = re.compile(r"(‘[^’]*’)")


def clean_pydoc_node(lines):
    text = "\n".join(lines)
    text = text.split("---------- Footnotes ----------")[0]
    text = text.split("* Menu:")[0]
    footnote_marker = re.compile(r"(?<=[\w.’)\]]) ?\(\d{1,2}\)|(?<=\s)\(\d{1,2}\)(?=\s)")
    text = NOTE_REF.sub(lambda m: (m.group(1) or m.group(2)), text)
    out = []
    for block in paragraphs(text.split("\n")):
        block = [l for l in block if not re.fullmatch(r"\s*[-=*_.]{3,}\s*", l)]
        if not block:
            continue
        if block[0].startswith(" "):  # code, notes and tables keep their lines
            out.append("\n".join(l.rstrip() for l in block))
        else:
            para = reflow(block)
            # footnote markers "RFC 7159(3)", but never inside ‘code’ quotes
            para = "".join(p if p.startswith("‘") else footnote_marker.sub("", p)
                           for p in QUOTED.split(para))
            out.append(para)
    return "\n\n".join(out)


def pydoc_documents(root):
    info = gzip.decompress((root / "usr/share/info/python3.11.info.gz").read_bytes()).decode()
    nodes = info.split("\x1f")
    up, order = {}, []
    for node in nodes:
        head, _, body = node.lstrip("\n").partition("\n")
        m = re.match(r"File: [^,]+,  Node: (.+?),(?:  Next: .+?,)?(?:  Prev: .+?,)?  Up: (.+)$", head)
        if m:
            up[m.group(1)] = m.group(2)
            order.append((m.group(1), body))

    def ancestors(name):
        chain = [name]
        while name in up and up[name] != "Top" and up[name] not in chain:
            name = up[name]
            chain.append(name)
        return chain

    docs = []
    for name, body in order:
        chain = ancestors(name)
        if chain[-1] not in PYDOC_PARTS or PYDOC_SKIP.intersection(chain):
            continue
        text = clean_pydoc_node(body.split("\n"))
        if len(text) >= 200:  # nodes that are only a heading and a menu carry no prose
            docs.append((name, text))
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--debs", type=Path, default=None, help="where the .deb files are kept")
    ap.add_argument("--seed", type=int, default=12)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    debs = fetch_debs(args.debs or args.out / "debs")
    readers = {"r-cran-janeaustenr": austen_documents, "bible-kjv-text": kjv_documents,
               "python3.11-doc": pydoc_documents}
    rng = random.Random(args.seed)
    manifest = {"seed": args.seed, "val_fraction": VAL_FRACTION, "packages": []}
    with open(args.out / "docs.jsonl", "w", encoding="utf-8") as f, \
            tempfile.TemporaryDirectory() as tmp:
        for name, read in readers.items():
            deb, version = debs[name]
            root = Path(tmp) / name
            unpack(deb, root)
            docs = read(root)
            counts = {"train": [0, 0], "val": [0, 0]}
            for title, text in docs:
                split = "val" if rng.random() < VAL_FRACTION else "train"
                counts[split][0] += 1
                counts[split][1] += len(text.encode("utf-8"))
                f.write(json.dumps({"source": name, "title": title, "split": split, "text": text},
                                   ensure_ascii=False) + "\n")
            manifest["packages"].append({
                "package": name, "version": version, "deb_sha256": sha256(deb),
                "license": PACKAGES[name][1],
                "documents": {k: v[0] for k, v in counts.items()},
                "text_bytes": {k: v[1] for k, v in counts.items()},
            })
            print(f"{name} {version}: {counts['train'][0]} + {counts['val'][0]} documents, "
                  f"{counts['train'][1]} + {counts['val'][1]} bytes (train + val)")
    total = sum(p["text_bytes"]["train"] + p["text_bytes"]["val"] for p in manifest["packages"])
    manifest["total_text_bytes"] = total
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"total: {total} bytes of text -> {args.out / 'docs.jsonl'}")


if __name__ == "__main__":
    main()
