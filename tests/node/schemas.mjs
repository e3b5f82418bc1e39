// The structured-output corpus: JSON schemas (flat and nested objects, arrays, enums, unions, $ref
// recursion, formats, patterns, integer bounds) and GBNF grammars with the strings they must accept.
// Free strings carry maxLength: a random-weight model closes an unbounded string (or an extra key of
// additionalProperties, tested in tests/llm/grammar_test.cpp) only by chance.

const short = (n = 8) => ({ type: "string", maxLength: n });

export const SCHEMAS = [
  { name: "flat", schema: { type: "object", properties: { name: short(), age: { type: "integer" } }, required: ["name", "age"], additionalProperties: false } },
  { name: "optional", schema: { type: "object", properties: { a: short(), b: { type: "boolean" }, c: { type: "null" } }, required: ["a"], additionalProperties: false } },
  { name: "all-optional", schema: { type: "object", properties: { x: { type: "integer" }, y: { type: "integer" }, z: short(4) }, additionalProperties: false } },
  { name: "nested", schema: { type: "object", properties: { user: { type: "object", properties: { id: { type: "integer" }, tags: { type: "array", items: short(5), maxItems: 3 } }, required: ["id", "tags"], additionalProperties: false } }, required: ["user"], additionalProperties: false } },
  { name: "deep", schema: { type: "object", properties: { a: { type: "object", properties: { b: { type: "object", properties: { c: { type: "object", properties: { d: { type: "boolean" } }, required: ["d"], additionalProperties: false } }, required: ["c"], additionalProperties: false } }, required: ["b"], additionalProperties: false } }, required: ["a"], additionalProperties: false } },
  { name: "array-of-int", schema: { type: "array", items: { type: "integer" }, maxItems: 6 } },
  { name: "array-bounds", schema: { type: "array", items: { type: "boolean" }, minItems: 2, maxItems: 4 } },
  { name: "exact-items", schema: { type: "array", items: { enum: ["a", "b"] }, minItems: 3, maxItems: 3 } },
  { name: "prefix-items", schema: { type: "array", prefixItems: [{ type: "integer" }, short(3), { type: "boolean" }], items: false } },
  { name: "prefix-then-items", schema: { type: "array", prefixItems: [{ const: "head" }], items: { type: "integer", minimum: 0, maximum: 9 }, minItems: 2, maxItems: 5 } },
  { name: "enum-strings", schema: { enum: ["red", "green", "blue"] } },
  { name: "enum-mixed", schema: { enum: ["x", 1, true, null, { k: [1, 2] }] } },
  { name: "const", schema: { type: "object", properties: { v: { const: "fixed \"quoted\" \\ value" } }, required: ["v"], additionalProperties: false } },
  { name: "type-list", schema: { type: ["integer", "null"] } },
  { name: "string-or-number", schema: { type: "object", properties: { v: { anyOf: [short(6), { type: "number" }] } }, required: ["v"], additionalProperties: false } },
  { name: "oneOf-objects", schema: { oneOf: [
    { type: "object", properties: { kind: { const: "circle" }, r: { type: "number" } }, required: ["kind", "r"], additionalProperties: false },
    { type: "object", properties: { kind: { const: "square" }, side: { type: "integer" } }, required: ["kind", "side"], additionalProperties: false }] } },
  { name: "allOf", schema: { allOf: [
    { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
    { type: "object", properties: { label: short(5) }, required: ["label"] }] } },
  { name: "ref-defs", schema: { $defs: { point: { type: "object", properties: { x: { type: "integer" }, y: { type: "integer" } }, required: ["x", "y"], additionalProperties: false } },
    type: "object", properties: { from: { $ref: "#/$defs/point" }, to: { $ref: "#/$defs/point" } }, required: ["from", "to"], additionalProperties: false } },
  { name: "ref-recursive-tree", schema: { $defs: { node: { type: "object", properties: { v: { type: "integer", minimum: 0, maximum: 99 }, kids: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 2 } }, required: ["v"], additionalProperties: false } },
    $ref: "#/$defs/node" } },
  { name: "ref-recursive-list", schema: { definitions: { cell: { anyOf: [{ type: "null" }, { type: "object", properties: { head: { type: "boolean" }, tail: { $ref: "#/definitions/cell" } }, required: ["head", "tail"], additionalProperties: false }] } },
    $ref: "#/definitions/cell" } },
  { name: "ref-root", schema: { type: "object", properties: { next: { anyOf: [{ $ref: "#" }, { type: "null" }] } }, required: ["next"], additionalProperties: false } },
  { name: "format-date", schema: { type: "object", properties: { d: { type: "string", format: "date" } }, required: ["d"], additionalProperties: false } },
  { name: "format-time", schema: { type: "string", format: "time" } },
  { name: "format-date-time", schema: { type: "string", format: "date-time" } },
  { name: "format-uuid", schema: { type: "string", format: "uuid" } },
  { name: "format-email", schema: { type: "array", items: { type: "string", format: "email" }, minItems: 1, maxItems: 2 } },
  { name: "pattern-code", schema: { type: "string", pattern: "^[A-Z]{3}-[0-9]{2,4}$" } },
  { name: "pattern-alternation", schema: { type: "string", pattern: "^(cat|dog|bird)s?$" } },
  { name: "pattern-escapes", schema: { type: "string", pattern: "^\\d{1,3}(\\.\\d{1,3}){3}$" } },
  { name: "pattern-quote", schema: { type: "string", pattern: "^a\"b\\\\c[xyz\"]?$" } },
  { name: "pattern-class-negated", schema: { type: "string", pattern: "^[^a-z\"\\\\]{2,5}$" } },
  { name: "min-length", schema: { type: "string", minLength: 3, maxLength: 5 } },
  { name: "int-range", schema: { type: "integer", minimum: -40, maximum: 125 } },
  { name: "int-exclusive", schema: { type: "integer", exclusiveMinimum: 99, exclusiveMaximum: 1000 } },
  { name: "int-min-only", schema: { type: "object", properties: { n: { type: "integer", minimum: 7 } }, required: ["n"], additionalProperties: false } },
  { name: "optional-nested-arrays", schema: { type: "object", properties: { grid: { type: "array", maxItems: 2, items: { type: "array", maxItems: 3, items: { type: "integer", minimum: 0, maximum: 9 } } }, label: short(3) }, additionalProperties: false } },
  { name: "tuple-of-refs", schema: { $defs: { pair: { type: "array", prefixItems: [{ enum: ["k1", "k2"] }, { type: "integer", minimum: -5, maximum: 5 }], items: false, minItems: 2 } },
    type: "array", items: { $ref: "#/$defs/pair" }, minItems: 1, maxItems: 3 } },
  { name: "number", schema: { type: "object", properties: { lat: { type: "number" }, lon: { type: "number" } }, required: ["lat", "lon"], additionalProperties: false } },
  { name: "unicode-keys", schema: { type: "object", properties: { "größe": { type: "integer" }, "名前": short(3) }, required: ["größe", "名前"], additionalProperties: false } },
  { name: "record-list", schema: { type: "object", properties: { items: { type: "array", maxItems: 3, items: { type: "object", properties: { sku: { type: "string", pattern: "^[a-z]{2}[0-9]{3}$" }, qty: { type: "integer", minimum: 1, maximum: 20 }, when: { type: "string", format: "date" } }, required: ["sku", "qty"], additionalProperties: false } } }, required: ["items"], additionalProperties: false } },
  { name: "nullable-union", schema: { type: "object", properties: { note: { anyOf: [short(4), { type: "null" }] }, score: { type: ["number", "null"] } }, required: ["note", "score"], additionalProperties: false } },
];

// GBNF grammars, each with strings it accepts (the JS checker must agree) and one it rejects.
export const GRAMMARS = [
  { name: "yes-no", gbnf: `root ::= "yes" | "no"`, good: ["yes"], bad: "maybe" },
  { name: "digits", gbnf: `root ::= [0-9]{1,5}`, good: ["12345"], bad: "123456" },
  { name: "word-list", gbnf: `root ::= word ("," word){0,3}\nword ::= [a-z]{1,4}`, good: ["ab,c"], bad: "ab," },
  { name: "arith", gbnf: `root ::= expr\nexpr ::= term (("+" | "-") term){0,3}\nterm ::= [0-9]{1,2} | "(" expr ")"`, good: ["1+(2-3)"], bad: "1+" },
  { name: "negated", gbnf: `root ::= "<" [^<>]{1,6} ">"`, good: ["<ab c>"], bad: "<a<b>" },
  { name: "escapes", gbnf: `root ::= "\\t" [\\x41-\\x43]+ "\\n"?`, good: ["\tAB\n"], bad: "\tAD" },
  { name: "unicode", gbnf: `root ::= ("é" | "€" | [α-ω]){1,4}`, good: ["é€αω"], bad: "e" },
  { name: "any-char", gbnf: `root ::= "[" .{2} "]"`, good: ["[xy]"], bad: "[x]" },
  { name: "nested-groups", gbnf: `root ::= (("a" | "b") ("c" | "d")?){1,3} "!"`, good: ["acbd!"], bad: "!" },
  { name: "comments", gbnf: `# a grammar with comments\nroot ::= greeting  # the start\ngreeting ::= "hi" | "hello" # two ways\n`, good: ["hello"], bad: "hey" },
  { name: "key-value", gbnf: `root ::= pair (";" pair){0,2}\npair ::= key "=" value\nkey ::= [a-z]{1,3}\nvalue ::= [0-9]{1,3} | "\\"" [a-z ]{0,4} "\\""`, good: ["a=1;bc=\"x y\""], bad: "a=" },
  { name: "exact-repeat", gbnf: `root ::= ("ab"){3}`, good: ["ababab"], bad: "abab" },
  { name: "open-repeat", gbnf: `root ::= "x"{2,} "."`, good: ["xxx."], bad: "x." },
  { name: "optional-chain", gbnf: `root ::= "a"? "b"? "c"`, good: ["bc", "c"], bad: "ab" },
  { name: "csv-row", gbnf: `root ::= cell ("," cell){2}\ncell ::= [0-9]{1,3} | [A-Z][a-z]{0,3}`, good: ["1,Ab,22"], bad: "1,2" },
  { name: "date-like", gbnf: `root ::= year "-" month\nyear ::= "19" [0-9][0-9] | "20" [0-2][0-9]\nmonth ::= "0" [1-9] | "1" [0-2]`, good: ["2024-12"], bad: "2024-13" },
  { name: "multiline", gbnf: `root ::= line{1,3}\nline ::= [a-c]{1,3} "\\n"`, good: ["ab\nc\n"], bad: "ab" },
  { name: "hex-color", gbnf: `root ::= "#" hex{6} | "#" hex{3}\nhex ::= [0-9a-fA-F]`, good: ["#a1B2c3", "#fff"], bad: "#ff" },
  { name: "json-bool-array", gbnf: `root ::= "[" (bool ("," bool)*)? "]"\nbool ::= "true" | "false"`, good: ["[true,false]", "[]"], bad: "[true,]" },
  { name: "grouped-alternatives", gbnf: `root ::= (\n  "alpha"\n  | "beta"\n  | "gamma" [0-9]\n)`, good: ["gamma7"], bad: "gamma" },
];

// The handful of schemas the other APIs (Anthropic, Responses, ollama) run through their own
// clients: the grammar path is shared, so these check each API's mapping onto it, not the corpus.
export const API_SCHEMAS = ["flat", "nested", "oneOf-objects", "ref-recursive-tree", "format-date", "pattern-code"]
  .map((name) => SCHEMAS.find((s) => s.name === name));

// Tools whose arguments random weights can only get right through the grammar.
export const STRICT_TOOLS = [
  { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string", maxLength: 8 }, unit: { enum: ["C", "F"] } }, required: ["city", "unit"], additionalProperties: false } },
  { name: "add", parameters: { type: "object", properties: { a: { type: "integer", minimum: 0, maximum: 999 }, b: { type: "integer" } }, required: ["a", "b"], additionalProperties: false } },
];
