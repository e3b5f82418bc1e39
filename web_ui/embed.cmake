# cmake -DINPUT=page.html -DOUTPUT=out.cpp -P embed.cmake: writes web_ui::index_html() returning the
# file's bytes (a byte array, not a string literal: no escaping rules and no literal length limits).
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n_bytes "${n_hex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUTPUT} "// Generated from web_ui/index.html by web_ui/embed.cmake; do not edit.\n"
  "#include \"web_ui/web_ui.h\"\n\nnamespace web_ui {\nnamespace {\nconst unsigned char PAGE[${n_bytes} + 1] = {\n${bytes}0};\n}\n"
  "std::string_view index_html() { return {reinterpret_cast<const char*>(PAGE), ${n_bytes}}; }\n}  // namespace web_ui\n")
