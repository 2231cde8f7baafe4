# Shared by scripts/setup and scripts/test: make sure Java, the virtualenvs, the JVM parts
# (Apache Kafka, Spark's Kafka source, delta-spark, spark-avro, Apicurio Registry: jvm/pom.xml,
# fetched with Maven into .jvm/)
# and the Azure Blob test server (Azurite) are ready.
# Idempotent: a second run only checks. Sourced, not executed.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SPARK_KAFKA_GROUP_VENV:-$REPO_ROOT/.venv}"
# ensure_prometheus: the Prometheus server and promtool of the exporter's tests.
source "$REPO_ROOT/scripts/_prometheus.sh"
# The jars of jvm/pom.xml, one folder per module (spark_kafka_group/testing/kafka_broker.py).
export SPARK_KAFKA_GROUP_JVM="${SPARK_KAFKA_GROUP_JVM:-$REPO_ROOT/.jvm}"
# The Spark line that Maven Central serves delta-spark and spark-sql-kafka for (jvm/pom.xml's
# spark.version and delta.version): the venv that runs the tests marked maven_spark.
MAVEN_SPARK_VENV="${VENV}-maven-spark"
MAVEN_SPARK_PINS=("pyspark==4.2.0" "delta-spark==4.4.0")

pick_python() {
    for candidate in "${PYTHON:-}" python3.12 python3.11 python3.10 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "error: Python 3.10 or newer is required (set PYTHON=/path/to/python3.x)." >&2
    return 1
}

java_major() {
    # Prints the major version of the java on PATH (17, 21, ...) or nothing.
    command -v java >/dev/null 2>&1 || return 0
    java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1
}

ensure_java() {
    local major
    major="$(java_major)"
    if [ -n "$major" ] && [ "$major" -ge 17 ]; then
        return 0
    fi
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "Java 17+ not found (found: ${major:-none}); installing openjdk-17-jre-headless ..."
        DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
        major="$(java_major)"
        if [ -n "$major" ] && [ "$major" -ge 17 ]; then
            return 0
        fi
    fi
    cat >&2 <<MSG
error: Spark needs Java 17 or newer on PATH (found: ${major:-none}).
  Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless
  macOS:         brew install openjdk@17
  or set JAVA_HOME and PATH to an existing JDK/JRE 17+.
MSG
    return 1
}

ensure_maven() {
    command -v mvn >/dev/null 2>&1 && return 0
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "Maven not found; installing it from the OS packages (for the JVM parts) ..."
        DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null
    fi
    command -v mvn >/dev/null 2>&1 && return 0
    echo "error: the JVM parts (jvm/pom.xml) are fetched with Maven 3.8+: install maven." >&2
    return 1
}

# ensure_jvm_parts: the jars of jvm/pom.xml in $SPARK_KAFKA_GROUP_JVM, fetched once (again only
# when a pom changes). Maven's own cache is ~/.m2; tests never reach the network.
ensure_jvm_parts() {
    jvm_parts_ready && return 0
    ensure_maven || return 1
    echo "Fetching the JVM parts (Apache Kafka, spark-sql-kafka, delta-spark, spark-avro, Apicurio Registry) with Maven ..."
    rm -rf "$SPARK_KAFKA_GROUP_JVM"
    mvn -B -q -f "$REPO_ROOT/jvm/pom.xml" package -Djvm.cache="$SPARK_KAFKA_GROUP_JVM" || return 1
    jvm_poms >"$SPARK_KAFKA_GROUP_JVM/.poms"
}

jvm_poms() { cat "$REPO_ROOT"/jvm/pom.xml "$REPO_ROOT"/jvm/*/pom.xml; }

# jvm_parts_ready: the jars were fetched for these very poms.
jvm_parts_ready() { [ "$(cat "$SPARK_KAFKA_GROUP_JVM/.poms" 2>/dev/null)" = "$(jvm_poms)" ]; }

# ensure_venv VENV_DIR [extra pip requirement ...]
# Installs the project with its test extras within constraints.txt (the versions CI runs). A
# package that an extra requirement names (e.g. "pyspark==4.0.*" for the oldest-pyspark venv)
# is left out of the constraints, so that the requirement decides its version.
ensure_venv() {
    local venv="$1"
    shift
    local python
    python="$(pick_python)" || return 1
    if [ ! -x "$venv/bin/python" ]; then
        echo "Creating virtualenv $venv ..."
        "$python" -m venv "$venv"
    fi
    local stamp="$venv/.spark-kafka-group-installed"
    local constraints="$venv/.spark-kafka-group-constraints.txt"
    venv_constraints "$venv" "$@" >"$constraints" || return 1
    local wanted
    wanted="$(cat "$REPO_ROOT/pyproject.toml" "$constraints"; echo "$*")"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
        echo "Installing spark-kafka-group and its test extras into $venv ..."
        "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
        "$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$constraints" \
            -e "$REPO_ROOT[test]" "$@"
        printf '%s' "$wanted" >"$stamp"
    fi
}

# venv_constraints VENV_DIR [requirement ...]: prints constraints.txt without the lines of the
# packages the requirements name (names compared as pip does: case, '-', '_' and '.' alike).
# Its pins are for Python 3.11+ (the releases need it); on 3.10 it prints nothing, with a note.
venv_constraints() {
    local venv="$1"
    shift
    "$venv/bin/python" - "$REPO_ROOT/constraints.txt" "$@" <<'PY'
import re
import sys


def name(requirement: str) -> str:
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", found.group(1)).lower() if found else ""


path, *own = sys.argv[1:]
if sys.version_info < (3, 11):
    print(f"note: {path} pins releases for Python 3.11+; installing unpinned", file=sys.stderr)
    raise SystemExit(0)
skip = {name(r) for r in own}
with open(path, encoding="utf-8") as lines:
    for line in lines:
        text = line.strip()
        if text and not text.startswith("#") and name(text) in skip:
            continue
        sys.stdout.write(line)
PY
}

# ensure_azurite VENV_DIR: the Azure Blob test server (npm azurite) in VENV_DIR/azurite, where
# tests/object_stores.py looks for it. Needs node and npm (ensure_npm).
AZURITE_VERSION="3.37.0"
ensure_azurite() {
    local prefix="$1/azurite"
    azurite_ready "$1" && return 0
    ensure_npm || return 1
    echo "Installing the Azure Blob test server (azurite@$AZURITE_VERSION) into $prefix ..."
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
        "azurite@$AZURITE_VERSION" >/dev/null
    printf '%s' "$AZURITE_VERSION" >"$prefix/.version"
}

azurite_ready() {
    [ -x "$1/azurite/node_modules/.bin/azurite-blob" ] &&
        [ "$(cat "$1/azurite/.version" 2>/dev/null)" = "$AZURITE_VERSION" ]
}

# ensure_npm: node and npm, for Azurite (installed from the OS packages as root when missing).
ensure_npm() {
    if ! command -v npm >/dev/null 2>&1; then
        if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
            echo "npm not found; installing nodejs and npm (for the Azurite test server) ..."
            DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
        fi
        if ! command -v npm >/dev/null 2>&1; then
            echo "error: the Azure Blob test server (Azurite) needs Node.js 18+ and npm." >&2
            return 1
        fi
    fi
}

# The parts fetched over the network besides the virtualenv, side by side with its install
# (on a fresh machine that is about two minutes less than one after the other): the JVM parts
# (Maven), Azurite (npm) and Prometheus (apt-get). The package managers they may install come
# first, one at a time: two apt-gets at once would fight over dpkg's lock.
# start_side_parts; ensure_venv ...; await_side_parts
start_side_parts() {
    jvm_parts_ready || ensure_maven || return 1
    azurite_ready "$VENV" || ensure_npm || return 1
    SIDE_LOGS="$(mktemp -d -t spark-kafka-group-setup.XXXXXX)"
    SIDE_PIDS=()
    ensure_jvm_parts >"$SIDE_LOGS/1-jvm" 2>&1 &
    SIDE_PIDS+=($!)
    ensure_azurite "$VENV" >"$SIDE_LOGS/2-azurite" 2>&1 &
    SIDE_PIDS+=($!)
    ensure_prometheus >"$SIDE_LOGS/3-prometheus" 2>&1 &
    SIDE_PIDS+=($!)
}

# await_side_parts: waits for start_side_parts' jobs, shows what they printed, and fails with
# the first failure's status.
await_side_parts() {
    local status=0 pid log failed
    for pid in "${SIDE_PIDS[@]}"; do
        wait "$pid" || { failed=$?; [ "$status" != 0 ] || status=$failed; }
    done
    for log in "$SIDE_LOGS"/*; do
        cat "$log"
    done
    rm -rf "$SIDE_LOGS"
    SIDE_PIDS=()
    return "$status"
}
