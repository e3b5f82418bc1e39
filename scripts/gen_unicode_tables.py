#!/usr/bin/env python3
"""Generates tokenizer/unicode_tables.cpp: the Unicode data the pre-tokenizers and NFC need.

Source: the Unicode Character Database as shipped by Debian's `unicode-data` package
(/usr/share/unicode, Unicode 15.0.0 in Debian 12). Files read:
  UnicodeData.txt             general category, canonical combining class, decomposition mappings
  PropList.txt                White_Space
  Scripts.txt                 Script=Han (kimi-k2 splits Han runs apart)
  CompositionExclusions.txt   script-specific + post-composition-version exclusions
  DerivedNormalizationProps.txt  NFC_QC (quick check) and Full_Composition_Exclusion (cross-check)

Usage: scripts/gen_unicode_tables.py [UCD_DIR] > tokenizer/unicode_tables.cpp
Standard library only. The output is deterministic; commit it.
"""
import os
import re
import sys

UCD = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
MAX_CP = 0x110000

# Must match enum Category in tokenizer/unicode.h.
CATEGORIES = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
              "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]
BIT_WHITESPACE = 0x20
BIT_HAN = 0x40
BIT_NFC_CHECK = 0x80  # NFC_QC is not Yes, or ccc != 0: a text without such code points is already NFC


def ucd_lines(name):
    with open(os.path.join(UCD, name), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                yield [field.strip() for field in line.split(";")]


def cp_range(field):
    if ".." in field:
        a, b = field.split("..")
        return range(int(a, 16), int(b, 16) + 1)
    return range(int(field, 16), int(field, 16) + 1)


def ucd_version():
    with open(os.path.join(UCD, "ReadMe.txt"), encoding="utf-8") as f:
        m = re.search(r"Unicode (\d+\.\d+\.\d+)", f.read())
    if m:
        return m.group(1)
    with open(os.path.join(UCD, "DerivedAge.txt"), encoding="utf-8") as f:
        m = re.search(r"DerivedAge-(\d+\.\d+\.\d+)\.txt", f.read())
    return m.group(1) if m else "unknown"


# --- UnicodeData.txt: category, ccc, decompositions -------------------------------------------------
category = bytearray(MAX_CP)  # 0 = Cn
ccc = {}
decomposition = {}  # cp -> list of cps (canonical, one level)
first_of_range = None
for f in ucd_lines("UnicodeData.txt"):
    cp, name, gc = int(f[0], 16), f[1], CATEGORIES.index(f[2])
    if name.endswith(", First>"):
        first_of_range = cp
        continue
    lo = first_of_range if name.endswith(", Last>") else cp
    first_of_range = None
    for c in range(lo, cp + 1):
        category[c] = gc
        if int(f[3]):
            ccc[c] = int(f[3])
    if f[5] and not f[5].startswith("<"):
        decomposition[cp] = [int(x, 16) for x in f[5].split()]

whitespace = set()
for f in ucd_lines("PropList.txt"):
    if f[1] == "White_Space":
        whitespace.update(cp_range(f[0]))

han = set()
for f in ucd_lines("Scripts.txt"):
    if f[1] == "Han":
        han.update(cp_range(f[0]))

nfc_qc = {}  # cp -> "N" | "M"
derived_full_exclusion = set()
for f in ucd_lines("DerivedNormalizationProps.txt"):
    if f[1] == "NFC_QC":
        for c in cp_range(f[0]):
            nfc_qc[c] = f[2]
    elif f[1] == "Full_Composition_Exclusion":
        derived_full_exclusion.update(cp_range(f[0]))

# Full_Composition_Exclusion = listed exclusions + singletons + non-starter decompositions (UAX #15).
exclusions = set()
for f in ucd_lines("CompositionExclusions.txt"):
    exclusions.update(cp_range(f[0]))
for cp, d in decomposition.items():
    if len(d) == 1 or ccc.get(cp, 0) or ccc.get(d[0], 0):
        exclusions.add(cp)
if exclusions != derived_full_exclusion:
    sys.exit("composition exclusions disagree with DerivedNormalizationProps.txt Full_Composition_Exclusion")


def full_decomposition(cp):
    if cp not in decomposition:
        return [cp]
    return [x for c in decomposition[cp] for x in full_decomposition(c)]


compositions = sorted((d[0], d[1], cp) for cp, d in decomposition.items() if len(d) == 2 and cp not in exclusions)

# --- per-code-point property byte, as a two-stage table ----------------------------------------------
props = bytearray(MAX_CP)
for c in range(MAX_CP):
    p = category[c]
    if c in whitespace:
        p |= BIT_WHITESPACE
    if c in han:
        p |= BIT_HAN
    if ccc.get(c, 0) or c in nfc_qc:
        p |= BIT_NFC_CHECK
    props[c] = p

BLOCK = 128
blocks, block_index, stage1 = [], {}, []
for start in range(0, MAX_CP, BLOCK):
    block = bytes(props[start:start + BLOCK])
    if block not in block_index:
        block_index[block] = len(blocks)
        blocks.append(block)
    stage1.append(block_index[block])


def ranges_of(mapping):
    """Collapses {cp: value} into sorted (first, last, value) runs of consecutive equal values."""
    out = []
    for cp in sorted(mapping):
        v = mapping[cp]
        if out and out[-1][1] == cp - 1 and out[-1][2] == v:
            out[-1][1] = cp
        else:
            out.append([cp, cp, v])
    return out


def emit_array(ctype, name, values, per_line, fmt):
    print(f"const {ctype} {name}[{len(values)}] = {{")
    for i in range(0, len(values), per_line):
        print("    " + ", ".join(fmt(v) for v in values[i:i + per_line]) + ",")
    print("};")


# --- output -----------------------------------------------------------------------------------------
version = ucd_version()
print(f"""// GENERATED by scripts/gen_unicode_tables.py from the Unicode Character Database {version}
// (Debian package unicode-data, {UCD}). Do not edit: change the script and regenerate.
// Per-code-point properties (general category, White_Space, Script=Han, NFC check) and the NFC data
// (canonical combining classes, full canonical decompositions, primary compositions, NFC_QC).
#include "tokenizer/unicode_impl.h"

namespace tok::unicode {{

const char UCD_VERSION[] = "{version}";
""")
print(f"// Two-stage property table: PROPS_BLOCKS[PROPS_STAGE1[cp / {BLOCK}] * {BLOCK} + cp % {BLOCK}].")
emit_array("uint16_t", "PROPS_STAGE1", stage1, 16, str)
emit_array("uint8_t", "PROPS_BLOCKS", [b for blk in blocks for b in blk], 24, lambda v: f"0x{v:02x}")

print("\n// Canonical combining class != 0, as runs.")
ccc_runs = ranges_of(ccc)
emit_array("CodepointRun", "CCC_RUNS", ccc_runs, 4, lambda r: f"{{0x{r[0]:x}, 0x{r[1]:x}, {r[2]}}}")

print("\n// NFC_QC = No (1) or Maybe (2), as runs.")
qc_runs = ranges_of({c: 1 if v == "N" else 2 for c, v in nfc_qc.items()})
emit_array("CodepointRun", "NFC_QC_RUNS", qc_runs, 4, lambda r: f"{{0x{r[0]:x}, 0x{r[1]:x}, {r[2]}}}")

print("\n// Full canonical decompositions (Hangul syllables are algorithmic and not listed).")
decomp_entries, decomp_data = [], []
for cp in sorted(decomposition):
    full = full_decomposition(cp)
    decomp_entries.append((cp, len(decomp_data), len(full)))
    decomp_data.extend(full)
emit_array("Decomposition", "DECOMPOSITIONS", decomp_entries, 4, lambda e: f"{{0x{e[0]:x}, {e[1]}, {e[2]}}}")
emit_array("uint32_t", "DECOMPOSITION_DATA", decomp_data, 10, lambda v: f"0x{v:x}")

print("\n// Primary composites: (first, second) -> composite, sorted by (first, second).")
emit_array("Composition", "COMPOSITIONS", compositions, 4, lambda c: f"{{0x{c[0]:x}, 0x{c[1]:x}, 0x{c[2]:x}}}")

print(f"""
const size_t N_CCC_RUNS = {len(ccc_runs)};
const size_t N_NFC_QC_RUNS = {len(qc_runs)};
const size_t N_DECOMPOSITIONS = {len(decomp_entries)};
const size_t N_COMPOSITIONS = {len(compositions)};

}}  // namespace tok::unicode""")
print(f"stage1 {len(stage1)} blocks {len(blocks)} ccc {len(ccc_runs)} qc {len(qc_runs)} "
      f"decomp {len(decomp_entries)}/{len(decomp_data)} comp {len(compositions)}", file=sys.stderr)
