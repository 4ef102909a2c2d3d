# One command's section of the Markdown reference from its --help (as CLI11 prints it): the
# description, the usage line, then each block (Positionals, Options, Subcommands) as a list of
# names and what they do, then the closing text. Subcommands link to their own sections.
#   sigilfs verity --help | awk -v name="sigilfs verity" -v level=3 -f help-to-markdown.awk
# CLI11 pads a name to column 30 and starts its description there, or puts a longer name on a
# line of its own and the description on the next, indented by 30.

function trim(s) {
  sub(/^[ \t]+/, "", s)
  sub(/[ \t]+$/, "", s)
  return s
}
# Help text as Markdown: a star would start emphasis; backquotes in the help are meant as code.
function md(s) {
  gsub(/\*/, "\\*", s)
  return s
}
# A description on a line of its own (under a long name): 30 spaces, then text. (No /{30}/: not
# every awk has intervals.)
function continued(s) { return substr(s, 1, 30) ~ /^ +$/ && substr(s, 31, 1) ~ /[^ ]/ }
function anchor(s) {
  s = tolower(s)
  gsub(/ /, "-", s)
  return s
}
function para(text) {
  print ""
  print text
}
# A name as CLI11 prints it ("--passfile TEXT Excludes: --extpass", "PATH TEXT REQUIRED") split
# into the name and its notes, so the code span holds only what is typed.
function item(block, name, desc,    notes, k, others, n, i, list) {
  if (block == "Subcommands") {
    print "- [`" name "`](#" anchor(prefix " " name) "): " md(desc)
    return
  }
  notes = ""
  if (name ~ / REQUIRED$/) {
    sub(/ REQUIRED$/, "", name)
    notes = " (required)"
  }
  if ((k = index(name, " Excludes: ")) > 0) {
    n = split(substr(name, k + 11), others, " ")
    list = ""
    for (i = 1; i <= n; i++) list = list (i > 1 ? ", " : "") "`" others[i] "`"
    name = substr(name, 1, k - 1)
    notes = notes " (not with " list ")"
  }
  print "- `" name "`" notes (desc == "" ? "" : ": " md(desc))
}

{ line[++count] = $0 }

END {
  prefix = name
  print substr("######", 1, level) " " name
  i = 1
  para(md(line[i++]))
  for (; i <= count; i++) {
    if (line[i] ~ /^Usage: /) {
      para("Usage: `" substr(line[i], 8) "`")
      continue
    }
    if (line[i] ~ /^[A-Z][a-z]+:$/) {
      block = substr(line[i], 1, length(line[i]) - 1)
      para(block == "Positionals" ? "Arguments:" : block ":")
      print ""
      for (i++; i <= count && line[i] ~ /^  [^ ]/; i++) {
        if (i < count && continued(line[i + 1])) {
          item(block, trim(line[i]), trim(line[i + 1]))
          i++
        } else {
          item(block, trim(substr(line[i], 1, 30)), trim(substr(line[i], 31)))
        }
      }
      i--
      continue
    }
    if (line[i] == "") continue
    # The closing text: paragraphs as they are, an indented line (an example) as code.
    if (line[i] ~ /^ /) {
      print ""
      print "```"
      for (; i <= count && line[i] ~ /^ /; i++) print trim(line[i])
      print "```"
      i--
      continue
    }
    print ""
    for (; i <= count && line[i] != "" && line[i] !~ /^ /; i++) print md(line[i])
    i--
  }
}
