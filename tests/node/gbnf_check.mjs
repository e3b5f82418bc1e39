// An independent GBNF recognizer (written from the format's semantics, sharing no code with
// tinyllm): parses a grammar into an AST and decides whether a whole string is in its language by
// computing the set of end positions each node can reach from a start position.

export function parseGbnf(src) {
  let i = 0;
  const rules = {};
  const err = (m) => { throw new Error(`gbnf_check: ${m} at ${i}`); };
  const space = (nl) => {
    for (;;) {
      if (src[i] === " " || src[i] === "\t" || (nl && (src[i] === "\n" || src[i] === "\r"))) i++;
      else if (src[i] === "#") while (i < src.length && src[i] !== "\n") i++;
      else break;
    }
  };
  const name = () => { const m = /^[A-Za-z0-9_-]+/.exec(src.slice(i)); if (!m) err("name"); i += m[0].length; return m[0]; };
  const char = () => {
    if (src[i] === "\\") {
      const e = src[i + 1]; i += 2;
      const hex = (n) => { const v = parseInt(src.slice(i, i + n), 16); i += n; return v; };
      if (e === "x") return hex(2);
      if (e === "u") return hex(4);
      if (e === "U") return hex(8);
      return { t: 9, n: 10, r: 13 }[e] ?? e.codePointAt(0);
    }
    const cp = src.codePointAt(i); i += cp > 0xffff ? 2 : 1; return cp;
  };
  const atom = (nl) => {
    const c = src[i];
    if (c === '"') { i++; const cps = []; while (src[i] !== '"') cps.push(char()); i++; return { k: "lit", cps }; }
    if (c === "[") {
      i++; const neg = src[i] === "^"; if (neg) i++;
      const ranges = [];
      while (src[i] !== "]") { const lo = char(); let hi = lo; if (src[i] === "-" && src[i + 1] !== "]") { i++; hi = char(); } ranges.push([lo, hi]); }
      i++; return { k: "set", neg, ranges };
    }
    if (c === ".") { i++; return { k: "set", neg: true, ranges: [] }; }
    if (c === "(") { i++; space(true); const a = alts(true); if (src[i] !== ")") err("')'"); i++; return a; }
    if (c !== undefined && /[A-Za-z0-9_-]/.test(c)) return { k: "ref", name: name() };
    return null;
  };
  const seq = (nl) => {
    const items = [];
    for (;;) {
      let a = atom(nl);
      if (!a) break;
      space(nl);
      for (;;) {
        let lo = 1, hi = 1;
        if (src[i] === "*") [lo, hi] = [0, Infinity];
        else if (src[i] === "+") [lo, hi] = [1, Infinity];
        else if (src[i] === "?") [lo, hi] = [0, 1];
        else if (src[i] === "{") {
          const m = /^\{\s*(\d+)\s*(,\s*(\d*)\s*)?\}/.exec(src.slice(i)); if (!m) err("{m,n}");
          lo = +m[1]; hi = m[2] === undefined ? lo : m[3] === "" ? Infinity : +m[3]; i += m[0].length - 1;
        } else break;
        i++; a = { k: "rep", a, lo, hi }; space(nl);
      }
      items.push(a);
    }
    return { k: "seq", items };
  };
  const alts = (nl) => {
    const list = [seq(nl)];
    for (;;) {
      const save = i; space(true);
      if (src[i] !== "|" || (!nl && false)) { i = save; break; }
      i++; space(true); list.push(seq(nl));
    }
    return { k: "alt", list };
  };
  space(true);
  while (i < src.length) {
    const n = name(); space(false);
    if (src.slice(i, i + 3) !== "::=") err("::="); i += 3; space(true);
    rules[n] = alts(false); space(true);
  }
  return rules;
}

// Does the grammar (rules from parseGbnf) derive exactly `text` from root?
export function gbnfAccepts(rules, text) {
  const cps = Array.from(text).map((c) => c.codePointAt(0));
  const memo = new Map();
  const ends = (node, pos) => {
    switch (node.k) {
      case "lit": {
        for (let j = 0; j < node.cps.length; j++) if (cps[pos + j] !== node.cps[j]) return [];
        return [pos + node.cps.length];
      }
      case "set": {
        if (pos >= cps.length) return [];
        const c = cps[pos];
        const inside = node.ranges.some(([lo, hi]) => lo <= c && c <= hi);
        return inside !== node.neg ? [pos + 1] : [];
      }
      case "seq": {
        let cur = new Set([pos]);
        for (const item of node.items) {
          const next = new Set();
          for (const p of cur) for (const e of ends(item, p)) next.add(e);
          cur = next;
          if (!cur.size) break;
        }
        return [...cur];
      }
      case "alt": { const out = new Set(); for (const a of node.list) for (const e of ends(a, pos)) out.add(e); return [...out]; }
      case "rep": {
        const out = new Set(); let cur = new Set([pos]);
        if (node.lo === 0) out.add(pos);
        for (let n = 1; n <= node.hi && cur.size; n++) {
          const next = new Set();
          for (const p of cur) for (const e of ends(node.a, p)) if (e !== p || n <= node.lo) next.add(e);
          cur = next;
          if (n >= node.lo) for (const e of cur) out.add(e);
          if (n > cps.length + node.lo) break;
        }
        return [...out];
      }
      case "ref": {
        const key = node.name + "@" + pos;
        if (memo.has(key)) return memo.get(key);
        memo.set(key, []);  // no left recursion in these grammars
        const r = ends(rules[node.name], pos);
        memo.set(key, r);
        return r;
      }
    }
    throw new Error("gbnf_check: bad node");
  };
  return ends(rules.root, 0).includes(cps.length);
}
