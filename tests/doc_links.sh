#!/usr/bin/env bash
# Every doc a message or a doc points to exists:
#  - a path `docs/NAME.md` named in docs/*.md, README.md or any file under src/
#    (comments, string literals, help texts) is a file of the repository;
#  - a relative markdown link [text](path) in docs/*.md or README.md points to
#    a file or folder (resolved against the linking file's folder; #anchors and
#    URLs are not checked).
# Usage: doc_links.sh ROOT   (exit 1 and one line per broken reference)
set -u
root=${1:?usage: doc_links.sh ROOT}
cd "$root" || exit 2

# Files of other repositories that a doc cites by their own path (the K3
# spec's table of sources): not ours to check.
external=" docs/kimi_k3.md "

bad=0
docs=(README.md docs/*.md)

# 1. docs/NAME.md mentioned anywhere in the docs or the sources. A path that
#    continues one before it (shared/docs/x.md) is not ours.
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  path=${rest#*:}
  path="docs/${path#*docs/}"  # drop the character before docs/, if any
  [[ $external == *" $path "* ]] && continue
  if [[ ! -f $path ]]; then
    echo "doc_links: $file:$line names $path, which does not exist"
    bad=1
  fi
done < <(grep -rnoE '(^|[^A-Za-z0-9_./-])docs/[A-Za-z0-9_/-]+\.md' "${docs[@]}" src 2>/dev/null)

# 2. Relative markdown links in the docs. Fenced code blocks and inline code
#    spans are left out first (C++ like a[i](x) is not a link).
for doc in "${docs[@]}"; do
  [[ -f $doc ]] || continue
  dir=$(dirname "$doc")
  while IFS= read -r hit; do
    line=${hit%%:*}
    target=${hit#*:}
    target=${target#*](}
    target=${target%)}
    target=${target%% *}  # an optional "title"
    target=${target#<}
    target=${target%>}
    case $target in
      http://* | https://* | mailto:* | '#'* | '') continue ;;
    esac
    target=${target%%#*}
    if [[ ! -e $dir/$target ]]; then
      echo "doc_links: $doc:$line links to $target, which does not exist"
      bad=1
    fi
  done < <(awk '/^[[:space:]]*(```|~~~)/ { fence = !fence; print ""; next }
                { if (fence) print ""; else { gsub(/`[^`]*`/, ""); print } }' "$doc" |
           grep -noE '\[[^]]*\]\([^)]+\)')
done
exit $bad
