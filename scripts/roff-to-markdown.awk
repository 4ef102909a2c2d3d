# Converts the man(7) macros the project's manual pages use to Markdown, so the pages in
# docs/reference/ come from the same source as the installed manuals: .TH (the title, without the
# date, which would change the page every day), .SH, .SS, .PP, .TP (a list item), .nf/.fi (a
# code block), .br, .B, .I and their alternations (.BI, .BR, ...), and the escapes \fB, \fI, \fR,
# \-, \e, \&. Bold becomes a code span (commands and options), italics stay italics.
#   awk -f roff-to-markdown.awk PAGE.N > PAGE.md
# A man page named in SEE ALSO whose Markdown form sits beside this one is linked: pass
# -v linked="sigilfs(1)=sigilfs.md pam_sigilfs(8)=pam_sigilfs.md".

# A line of text in Markdown. The font is the global `font`: a span may go on past the line's
# end (a code span may hold a line break).
function inline(s,    out, c, n) {
  out = ""
  while ((n = index(s, "\\")) > 0) {
    out = out md(substr(s, 1, n - 1), font)
    c = substr(s, n + 1, 1)
    if (c == "f") {
      out = out close_font(font)
      font = substr(s, n + 2, 1)
      if (font == "P") font = "R"
      out = out open_font(font)
      s = substr(s, n + 3)
      continue
    }
    if (c == "-") out = out "-"
    else if (c == "e") out = out "\\"
    else if (c != "&") out = out c  # \& is a zero-width guard: nothing
    s = substr(s, n + 2)
  }
  return out md(s, font)
}
function open_font(f) { return f == "B" ? "`" : f == "I" ? "*" : "" }
function close_font(f) { return open_font(f) }
# Plain text: the characters Markdown would read as emphasis escaped (not inside a code span).
function md(s, font) {
  if (font == "B") return s
  gsub(/\*/, "\\*", s)
  return s
}

# The arguments of a macro line, quotes honoured.
function args(line, a,    n, rest, m) {
  n = 0
  rest = line
  sub(/^\.[A-Za-z]+[ \t]*/, "", rest)
  while (rest != "") {
    if (substr(rest, 1, 1) == "\"") {
      m = index(substr(rest, 2), "\"")
      if (m == 0) m = length(rest)
      a[++n] = substr(rest, 2, m - 1)
      rest = substr(rest, m + 2)
    } else {
      m = index(rest, " ")
      if (m == 0) m = length(rest) + 1
      a[++n] = substr(rest, 1, m - 1)
      rest = substr(rest, m + 1)
    }
    sub(/^[ \t]+/, "", rest)
  }
  return n
}

# .B, .I, .BI, .BR, ...: the arguments in alternating fonts (.B and .I: one font, spaced).
function fonts(macro, line,    a, n, i, out, f) {
  n = args(line, a)
  if (length(macro) == 1) {
    out = ""
    for (i = 1; i <= n; i++) out = out (i > 1 ? " " : "") a[i]
    return inline("\\f" macro out "\\fR")
  }
  out = ""
  for (i = 1; i <= n; i++) {
    f = substr(macro, (i - 1) % 2 + 1, 1)
    out = out inline("\\f" f a[i] "\\fR")
  }
  return out
}

# The words of .SH or .SS: the rest of the line, quoted or not.
function heading_text(line) {
  sub(/^\.[A-Z]+[ \t]+/, "", line)
  gsub(/"/, "", line)
  return line
}
function title(s) { return toupper(substr(s, 1, 1)) tolower(substr(s, 2)) }

# The paragraph being built: its lines, flushed at a paragraph break. A list item (.TP) is one
# paragraph whose first line is the term.
function add(text) { para[++np] = text }
function flush(    i) {
  if (np == 0) return
  if (blank_needed) print ""
  for (i = 1; i <= np; i++) {
    if (item) print (i == 1 ? "- " : "  ") para[i] (i == 1 && np > 1 ? ":" : "")
    else print para[i]
  }
  np = 0
  blank_needed = 1
  item = 0
  font = "R"
}
function heading(text) {
  flush()
  if (blank_needed) print ""
  print text
  blank_needed = 1
}
function link(s,    pairs, n, i, kv) {
  n = split(linked, pairs, " ")
  for (i = 1; i <= n; i++) {
    split(pairs[i], kv, "=")
    s = replace_all(s, kv[1], "[" kv[1] "](" kv[2] ")")
  }
  return s
}
function replace_all(s, from, to,    out, k) {
  out = ""
  while ((k = index(s, from)) > 0) {
    out = out substr(s, 1, k - 1) to
    s = substr(s, k + length(from))
  }
  return out s
}

BEGIN { np = 0; item = 0; blank_needed = 0; verbatim = 0; section = ""; font = "R" }

verbatim && /^\.fi/ { print "```"; verbatim = 0; blank_needed = 1; next }
verbatim {
  line = $0
  gsub(/\\f[BIRP]/, "", line)
  gsub(/\\-/, "-", line)
  gsub(/\\e/, "\\", line)
  gsub(/\\&/, "", line)
  print line
  next
}

/^\.\\"/ { next }  # a comment
/^\.TH / {
  args($0, a)
  heading("# " tolower(a[1]) "(" a[2] ")")
  next
}
/^\.SH / {
  section = heading_text($0)
  heading("## " title(section))
  next
}
/^\.SS / {
  heading("### " heading_text($0))
  next
}
/^\.(PP|P|LP)$/ { flush(); next }
/^\.TP/ { flush(); item = 1; next }
/^\.br$/ { if (np > 0) para[np] = para[np] "\\"; next }
/^\.nf$/ {
  flush()
  if (blank_needed) print ""
  print "```"
  verbatim = 1
  next
}
/^\.(B|I|BI|IB|BR|RB|IR|RI) / || /^\.(B|I)$/ {
  macro = substr($1, 2)
  add(fonts(macro, $0))
  next
}
/^\./ {
  print "roff-to-markdown: unknown macro: " $0 > "/dev/stderr"
  failed = 1
  exit 1
}
{
  text = inline($0)
  if (section == "SEE ALSO" && linked != "") text = link(text)
  add(text)
}
END {
  if (failed) exit 1
  flush()
}
