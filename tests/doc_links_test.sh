#!/usr/bin/env bash
# tests/doc_links.sh on small trees: it passes a tree whose references all
# resolve and names each broken one in a tree that has them.
# Usage: doc_links_test.sh PATH_TO_doc_links.sh
set -u
check=$(realpath "${1:?usage: doc_links_test.sh doc_links.sh}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "doc_links_test: $*"; exit 1; }

mk() {  # a tree whose references all resolve
  rm -rf "$tmp/t" && mkdir -p "$tmp/t/docs/img" "$tmp/t/src/cli" && cd "$tmp/t" || exit 2
  printf '# x\nSee [the guide](docs/guide.md#install), [site](https://example.com), [top](#x).\n' > README.md
  printf 'Back to [README](../README.md); [pictures](img/); also docs/other.md.\n' > docs/guide.md
  printf '```\nint a[2](3);  [not](a-link)\n```\nCode `[x](nowhere)` is not a link; shared/docs/elsewhere.md is not ours.\n' > docs/other.md
  printf '// see docs/guide.md\nconst char* h = "docs/other.md";\n' > src/cli/a.cpp
}

mk
out=$(bash "$check" "$tmp/t") || fail "a good tree failed: $out"

mk
printf '// docs/gone.md says why\n' > src/cli/b.cpp
out=$(bash "$check" "$tmp/t") && fail "a missing docs/gone.md named in src/ passed"
[[ $out == *"src/cli/b.cpp:1 names docs/gone.md"* ]] || fail "unexpected report: $out"

mk
printf 'See [numbers](results.md) and [pics](img/a.png#top).\n' >> docs/guide.md
out=$(bash "$check" "$tmp/t") && fail "dangling links passed"
[[ $out == *"docs/guide.md:2 links to results.md"* && $out == *"links to img/a.png"* ]] || fail "unexpected report: $out"

mk
printf 'Run K3: docs/user-guide.md\n' >> README.md
out=$(bash "$check" "$tmp/t") && fail "a missing docs path in README.md passed"
[[ $out == *"README.md:3 names docs/user-guide.md"* ]] || fail "unexpected report: $out"
echo "doc_links_test: ok"
