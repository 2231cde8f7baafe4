# shellcheck shell=bash
# ensure_prometheus: the Prometheus server and promtool that the exporter's tests run
# (tests/integration/test_prometheus.py loads the shipped alert rules and the Grafana
# dashboard's queries into them). Source this file, then call ensure_prometheus.
#
# Debian's `prometheus` package provides both binaries. Installing it as root with apt-get is
# the one change made to the machine; its service is kept from starting (a policy-rc.d that
# refuses every start, only while apt-get runs), so that nothing listens on :9090 afterwards:
# the tests start their own server on 127.0.0.1 with a temporary configuration and storage.

ensure_prometheus() {
    if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "Prometheus or promtool not found; installing Debian's prometheus package ..."
        local policy=/usr/sbin/policy-rc.d added=""
        if [ ! -e "$policy" ]; then
            printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added=1
        fi
        local status=0
        DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                prometheus >/dev/null || status=$?
        if [ -n "$added" ]; then
            rm -f "$policy"
        fi
        if [ "$status" = 0 ] && command -v prometheus >/dev/null 2>&1 &&
            command -v promtool >/dev/null 2>&1; then
            return 0
        fi
    fi
    cat >&2 <<MSG
error: the tests need the Prometheus server and promtool on PATH (found: prometheus
  $(command -v prometheus || echo none), promtool $(command -v promtool || echo none)).
  Debian/Ubuntu: sudo apt-get install prometheus
  elsewhere:     the release tarball from https://prometheus.io/download/ (both binaries)
MSG
    return 1
}
