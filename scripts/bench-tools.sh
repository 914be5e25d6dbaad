# Sourced by the benchmark scripts: the peers and load tools they measure
# with, installed once into the cache outside the checkout at pinned
# versions (reinstalled when the pin changes).
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"

# LiteLLM's proxy (pinned, with its proxy extras) in a venv of its own;
# prints the path of its `litellm` command.
litellm_bin() {
  local venv="$cache/venv-litellm" requirements=scripts/requirements-litellm.txt want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ ! -x "$venv/bin/litellm" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
    echo "== installing LiteLLM into $venv" >&2
    rm -rf "$venv"
    # Called as $(litellm_bin), where set -e does not reach: each step
    # returns its failure itself.
    python3 -m venv "$venv" >&2 || return 1
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >&2 || return 1
    echo "$want" > "$venv/.requirements.sha256"
  fi
  echo "$venv/bin/litellm"
}

# oha, a constant-rate HTTP load tool, from crates.io with its own lock
# file; prints the path of the binary.
oha_version=1.16.0
oha_bin() {
  local root="$cache/oha-$oha_version"
  if [ ! -x "$root/bin/oha" ]; then
    echo "== installing oha $oha_version into $root" >&2
    cargo install oha --locked --version "$oha_version" --root "$root" >&2 || return 1
  fi
  echo "$root/bin/oha"
}
