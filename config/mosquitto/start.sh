#!/bin/sh
# Entry point of the stack's mosquitto (docker-compose.yml, service mosquitto): copies the password
# file and the ACL from this folder to a folder of mosquitto's own, owned by the user mosquitto
# runs as and readable by nobody else, then runs the command it is given (mosquitto -c ...).
#
# Why: started as root, mosquitto 2 drops to the user "mosquitto" before it reads these files,
# and a bind mount keeps the host's owner and mode, which that user may not be able to read
# (newer versions also warn about, and will refuse, files it does not own or others can read).
# Tests/stack/run.sh runs this same script outside a container, with MOSQUITTO_SECRETS and
# MOSQUITTO_DATA pointing into a temporary folder.
set -eu

here=$(dirname "$0")
secrets=${MOSQUITTO_SECRETS:-/mosquitto/secrets}
data=${MOSQUITTO_DATA:-/mosquitto/data}

mkdir -p "$secrets" "$data"
chmod 0700 "$secrets"
for file in passwords acl; do
    cp "$here/$file" "$secrets/$file.new"
    chmod 0600 "$secrets/$file.new"
    mv "$secrets/$file.new" "$secrets/$file"
done
if [ "$(id -u)" = 0 ] && id mosquitto >/dev/null 2>&1; then
    chown -R mosquitto:mosquitto "$secrets" "$data"
fi

exec "$@"
