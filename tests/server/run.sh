#!/bin/sh
# run.sh 1BIT_BINARY - the ctest entry (server_openai_node) for the tests
# that drive `1bit serve` through the official openai npm client.
#
# Exit 77 (ctest: skipped, never passed) when what the tests need is not
# here: ../shared/models, node >= 20 and npm, the locked client from the
# registry (offline), or text support in this build.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cli=${1:?usage: run.sh path/to/1bit}
models=${OB_SHARED_MODELS:-$here/../../../shared/models}

if [ ! -f "$models/stories260K/stories260K.gguf" ]; then
    echo "skipped: $models/stories260K is absent"
    exit 77
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "skipped: node and npm are needed (Debian: apt-get install nodejs npm, node >= 20)"
    exit 77
fi
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
    echo "skipped: node $(node --version) is older than 20, which the openai client needs"
    exit 77
fi

cd "$here" || exit 1
log=$(mktemp)
marker=$(mktemp)
rm -f "$marker"
trap 'rm -f "$log" "$marker"' EXIT
# exactly the versions in package-lock.json
if ! npm ci --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
    cat "$log"
    echo "skipped: npm ci could not install the openai client (offline?)"
    exit 77
fi

OB_CLI_PATH=$cli OB_MODELS=$models OB_SKIP_MARKER=$marker node --test --test-reporter=spec openai.test.mjs
rc=$?
if [ "$rc" -eq 0 ] && [ -e "$marker" ]; then
    cat "$marker"
    exit 77
fi
exit "$rc"
