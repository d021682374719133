# Sourced by the scripts here: `require COMMAND PACKAGE` installs the Debian package when the
# command is missing (as root, or through sudo).
require() {
  command -v "$1" >/dev/null 2>&1 && return
  echo "==> installing $2"
  local as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2"
}
