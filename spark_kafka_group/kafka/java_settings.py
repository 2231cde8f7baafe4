"""Java Kafka client settings, translated to librdkafka's (or refused with the fix).

Spark and Flink users write the Java client's keys: ``sasl.jaas.config`` with a login module,
``ssl.truststore.*`` / ``ssl.keystore.*`` with a JKS, PKCS12 or PEM store,
``ssl.endpoint.identification.algorithm=""``. librdkafka has other keys for most of them and
refuses the rest at connect time. Consumer settings copied from Spark's Kafka source
(``fetch.max.wait.ms``, ``max.poll.records`` ...) are renamed where librdkafka has the same
setting under another name and refused, with the reason, where it has none.
:func:`translate_java_settings` is the one place that maps
them; :func:`spark_kafka_group.kafka.config.client_config` applies it to every client
(driver, executors, CLI), and option parsing applies it first so a wrong setting fails when
the query starts. It is idempotent: librdkafka's own keys pass through unchanged.

Secrets (passwords, the JAAS text) never appear in a message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from spark_kafka_group.errors import OptionError

#: First bytes of a Java KeyStore (JKS) and of a JCEKS store.
JKS_MAGIC = b"\xfe\xed\xfe\xed"
JCEKS_MAGIC = b"\xce\xce\xce\xce"

# Java-only settings with no librdkafka equivalent, with what to do instead.
_NO_EQUIVALENT: dict[str, str] = {
    "ssl.protocol": "librdkafka negotiates the TLS version with OpenSSL; remove it "
    "(restrict the ciphers with {p}ssl.cipher.suites if needed)",
    "ssl.enabled.protocols": "librdkafka negotiates the TLS version with OpenSSL; remove it "
    "(restrict the ciphers with {p}ssl.cipher.suites if needed)",
    "ssl.keymanager.algorithm": "librdkafka uses OpenSSL; remove it",
    "ssl.trustmanager.algorithm": "librdkafka uses OpenSSL; remove it",
    "ssl.secure.random.implementation": "librdkafka uses OpenSSL; remove it",
    "ssl.provider": "use {p}ssl.providers (OpenSSL 3 providers) or remove it",
    "ssl.engine.factory.class": "use {p}ssl.engine.location / {p}ssl.providers",
    "sasl.login.callback.handler.class": "for OAUTHBEARER use {p}sasl.oauthbearer.method=oidc "
    "with {p}sasl.oauthbearer.client.id, {p}sasl.oauthbearer.client.secret and "
    "{p}sasl.oauthbearer.token.endpoint.url",
    "sasl.client.callback.handler.class": "for OAUTHBEARER use {p}sasl.oauthbearer.method=oidc "
    "with {p}sasl.oauthbearer.client.id, {p}sasl.oauthbearer.client.secret and "
    "{p}sasl.oauthbearer.token.endpoint.url",
}

# The Java consumer's settings whose librdkafka equivalent has another name.
_CONSUMER_RENAMED: dict[str, str] = {
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    # The Java client's network request timeout; librdkafka's request.timeout.ms is the
    # producer's acknowledgement timeout, which a consumer ignores.
    "request.timeout.ms": "socket.timeout.ms",
}

_REMOVE_JAVA_PLUGIN = "it names Java classes, which librdkafka cannot load; remove it"

# The Java consumer's settings with no librdkafka equivalent, and why.
_CONSUMER_NO_EQUIVALENT: dict[str, str] = {
    "max.poll.records": "this source reads each micro-batch's offset ranges whole, so a "
    "record count per poll has no role; bound a micro-batch with the option "
    "maxOffsetsPerTrigger and a Spark task with maxRecordsPerPartition",
    "exclude.internal.topics": "give subscribePattern a regex that does not match the "
    "internal topics (names starting with '__')",
    "internal.leave.group.on.close": "a member leaves its group when its query stops; remove it",
    "interceptor.classes": _REMOVE_JAVA_PLUGIN,
    "metric.reporters": _REMOVE_JAVA_PLUGIN,
    "metrics.num.samples": "the Java client's metrics do not exist here; remove it",
    "metrics.sample.window.ms": "the Java client's metrics do not exist here; remove it",
    "metrics.recording.level": "the Java client's metrics do not exist here; remove it",
    "security.providers": "librdkafka uses OpenSSL; remove it",
}

# PEM text given inline (Kafka's KIP-651), one to one.
_PEM_TEXT: dict[str, str] = {
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.key": "ssl.key.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
}

_SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

_JAAS_ENTRY = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)\b"
    r"(?P<options>.*?)\s*;?\s*$",
    re.DOTALL | re.IGNORECASE,
)
# key=value with the value double-quoted (backslash escapes, as Kafka's JaasConfig) or bare.
_JAAS_OPTION = re.compile(r'\s*([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


class _Settings:
    """The client settings being translated: keys matched case-insensitively, kept as written."""

    def __init__(self, conf: Mapping[str, str], prefix: str) -> None:
        self.values = {str(k): str(v) for k, v in conf.items()}
        self._keys = {k.lower(): k for k in self.values}
        self.prefix = prefix

    def get(self, key: str) -> str | None:
        original = self._keys.get(key)
        return None if original is None else self.values[original]

    def pop(self, key: str) -> str | None:
        original = self._keys.pop(key, None)
        return None if original is None else self.values.pop(original)

    def set(self, key: str, value: str) -> None:
        self.values[self._keys.setdefault(key, key)] = value

    def put(self, key: str, value: str, *, source: str) -> None:
        """Set librdkafka's ``key`` from the Java setting ``source``; refuse a contradiction."""
        current = self.get(key)
        if current is not None and current != value:
            raise OptionError(
                f"{self.prefix}{source} and {self.prefix}{key} are both set and disagree: "
                f"librdkafka reads {self.prefix}{key}; keep only one of them."
            )
        self.set(key, value)


def translate_java_settings(conf: Mapping[str, str], *, prefix: str = "") -> dict[str, str]:
    """``conf`` with the Java client's security keys replaced by librdkafka's.

    ``prefix`` is how the user wrote the keys (``"kafka."`` for source options, ``""`` for a
    client properties file); messages name keys with it. Raises :class:`OptionError` for a
    setting librdkafka cannot honour, naming the librdkafka key to use instead.
    """
    settings = _Settings(conf, prefix)
    for key, fix in {**_NO_EQUIVALENT, **_CONSUMER_NO_EQUIVALENT}.items():
        if settings.get(key) is not None:
            raise OptionError(
                f"{prefix}{key} is a Java Kafka client setting librdkafka does not have: "
                f"{fix.format(p=prefix)}."
            )
    for java_key, librdkafka_key in _CONSUMER_RENAMED.items():
        value = settings.pop(java_key)
        if value is not None:
            settings.put(librdkafka_key, value, source=java_key)
    jaas = settings.pop("sasl.jaas.config")
    if jaas is not None:
        _translate_jaas(jaas, settings)
    algorithm = settings.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        value = algorithm.strip().lower()
        if value not in ("", "none", "https"):
            raise OptionError(
                f"{prefix}ssl.endpoint.identification.algorithm = {algorithm!r} is not valid: "
                "use 'https' (check the broker's host name, the default) or '' / 'none' "
                "(do not check it)."
            )
        settings.set("ssl.endpoint.identification.algorithm", value or "none")
    for java_key, librdkafka_key in _PEM_TEXT.items():
        text = settings.pop(java_key)
        if text is not None:
            settings.put(librdkafka_key, text, source=java_key)
    _translate_truststore(settings)
    _translate_keystore(settings)
    return settings.values


# ---------------------------------------------------------------------------------- SASL


def _translate_jaas(jaas: str, settings: _Settings) -> None:
    prefix = settings.prefix
    key = f"{prefix}sasl.jaas.config"
    entries = [e for e in _split_entries(jaas) if e.strip()]
    if len(entries) != 1:
        raise OptionError(
            f"{key} holds {len(entries)} login module entries; give exactly one, e.g. "
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="..." '
            'password="...";'
        )
    match = _JAAS_ENTRY.match(entries[0])
    if match is None:
        raise OptionError(
            f"{key} is not a JAAS entry 'LoginModuleClass required key=\"value\" ...;' "
            "(its text is not shown: it may hold a password)."
        )
    module = match.group("module")
    options = _parse_jaas_options(match.group("options"), key, module)
    kind = module.rsplit(".", 1)[-1]
    given = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms")
    # Exact case: librdkafka refuses "scram-sha-512" as the Java client does.
    mechanism = given.strip() if given is not None else None
    if kind in ("PlainLoginModule", "ScramLoginModule"):
        wanted = ("PLAIN",) if kind == "PlainLoginModule" else _SCRAM_MECHANISMS
        if mechanism not in wanted:
            shown = "not set (the default is GSSAPI)" if mechanism is None else repr(mechanism)
            raise OptionError(
                f"{key} uses {kind}, but {prefix}sasl.mechanism is {shown}: set "
                f"{prefix}sasl.mechanism to {' or '.join(wanted)}."
            )
        missing = [name for name in ("username", "password") if name not in options]
        if missing:
            raise OptionError(
                f"{key} ({kind}) has no {' and no '.join(missing)} option; write "
                f'{module} required username="..." password="...";'
            )
        settings.put("sasl.username", options["username"], source="sasl.jaas.config")
        settings.put("sasl.password", options["password"], source="sasl.jaas.config")
        return
    if kind == "Krb5LoginModule":
        raise OptionError(
            f"{key} uses Kerberos ({module}), which librdkafka configures with its own keys: "
            f"set {prefix}sasl.mechanism=GSSAPI, {prefix}sasl.kerberos.service.name, "
            f"{prefix}sasl.kerberos.principal and {prefix}sasl.kerberos.keytab instead of "
            f"{key} (this needs a librdkafka built with GSSAPI support)."
        )
    if kind == "OAuthBearerLoginModule":
        raise OptionError(
            f"{key} uses OAUTHBEARER ({module}), which librdkafka configures with its own keys: "
            f"set {prefix}sasl.mechanism=OAUTHBEARER, {prefix}sasl.oauthbearer.method=oidc, "
            f"{prefix}sasl.oauthbearer.client.id, {prefix}sasl.oauthbearer.client.secret, "
            f"{prefix}sasl.oauthbearer.token.endpoint.url (and {prefix}sasl.oauthbearer.scope) "
            f"instead of {key}."
        )
    raise OptionError(
        f"{key} uses the login module {module!r}, which has no librdkafka equivalent. "
        "PlainLoginModule and ScramLoginModule are translated to "
        f"{prefix}sasl.username / {prefix}sasl.password; otherwise set librdkafka's "
        f"{prefix}sasl.* keys directly."
    )


def _split_entries(text: str) -> list[str]:
    """Split a JAAS text on the ``;`` that end entries (not those inside quotes)."""
    entries, current, quoted, escaped = [], [], False, False
    for char in text:
        current.append(char)
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == ";" and not quoted:
            entries.append("".join(current))
            current = []
    entries.append("".join(current))
    return entries


def _parse_jaas_options(text: str, key: str, module: str) -> dict[str, str]:
    options: dict[str, str] = {}
    pos = 0
    text = text.rstrip().rstrip(";")
    while pos < len(text.rstrip()):
        match = _JAAS_OPTION.match(text, pos)
        if match is None:
            raise OptionError(
                f"{key} ({module}): cannot read the options after the login module; write "
                'them as key="value" pairs (the text is not shown: it may hold a password).'
            )
        quoted, bare = match.group(2), match.group(3)
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        options[match.group(1)] = value
        pos = match.end()
    return options


# ---------------------------------------------------------------------------------- TLS


def store_type(location: str, declared: str | None) -> str | None:
    """JKS, JCEKS, PKCS12 or PEM: the declared ``ssl.*store.type``, else from the file's first
    bytes. ``None`` when the type is not declared and the file cannot be read here."""
    if declared is not None and declared.strip():
        return declared.strip().upper()
    try:
        with open(location, "rb") as f:
            head = f.read(64)
    except OSError:
        return None
    if head.startswith(JKS_MAGIC):
        return "JKS"
    if head.startswith(JCEKS_MAGIC):
        return "JCEKS"
    if head.lstrip().startswith(b"-----BEGIN"):
        return "PEM"
    return "PKCS12"


def _translate_truststore(settings: _Settings) -> None:
    prefix = settings.prefix
    location = settings.pop("ssl.truststore.location")
    password = settings.pop("ssl.truststore.password")
    declared = settings.pop("ssl.truststore.type")
    if location is None:
        return
    kind = store_type(location, declared)
    key = f"{prefix}ssl.truststore.location"
    if kind is None:
        raise OptionError(
            f"{key} = {location!r} cannot be read on this machine and "
            f"{prefix}ssl.truststore.type is not set. librdkafka reads trusted CA "
            f"certificates from a PEM file: set {prefix}ssl.ca.location to one."
        )
    if kind == "PEM":
        if password is not None:
            raise OptionError(
                f"{prefix}ssl.truststore.password cannot be used with the PEM trust store "
                f"{location!r} (a PEM file has no store password): remove it."
            )
        settings.put("ssl.ca.location", location, source="ssl.truststore.location")
        return
    if kind in ("JKS", "JCEKS"):
        convert = (
            f"convert it: keytool -importkeystore -srckeystore {location} "
            "-destkeystore truststore.p12 -deststoretype PKCS12, then openssl pkcs12 "
            "-in truststore.p12 -nokeys -out ca.pem"
        )
    elif kind == "PKCS12":
        convert = f"convert it: openssl pkcs12 -in {location} -nokeys -out ca.pem"
    else:
        convert = "give a PEM file of CA certificates"
    raise OptionError(
        f"{key} = {location!r} is a {kind} trust store; librdkafka reads trusted CA "
        f"certificates only from PEM: {convert}, and set {prefix}ssl.ca.location=ca.pem "
        f"instead of {prefix}ssl.truststore.*."
    )


def _translate_keystore(settings: _Settings) -> None:
    prefix = settings.prefix
    declared = settings.pop("ssl.keystore.type")
    # ssl.keystore.location / .password are librdkafka keys too, for PKCS12 only.
    location = settings.get("ssl.keystore.location")
    if location is None:
        return
    kind = store_type(location, declared)
    if kind is None or kind == "PKCS12":
        # librdkafka's own meaning; a file missing here is librdkafka's to report.
        key_password = settings.get("ssl.key.password")
        if key_password is not None:
            if settings.get("ssl.keystore.password") != key_password:
                raise OptionError(
                    f"{prefix}ssl.key.password differs from {prefix}ssl.keystore.password for "
                    f"the PKCS12 key store {location!r}: librdkafka opens the store and its key "
                    f"with {prefix}ssl.keystore.password alone. Re-export the store with one "
                    f"password, or use PEM files ({prefix}ssl.certificate.location, "
                    f"{prefix}ssl.key.location, {prefix}ssl.key.password)."
                )
            settings.pop("ssl.key.password")
        return
    if kind == "PEM":
        if settings.get("ssl.keystore.password") is not None:
            raise OptionError(
                f"{prefix}ssl.keystore.password cannot be used with the PEM key store "
                f"{location!r}: a PEM key is protected by {prefix}ssl.key.password only."
            )
        settings.pop("ssl.keystore.location")
        settings.put("ssl.certificate.location", location, source="ssl.keystore.location")
        settings.put("ssl.key.location", location, source="ssl.keystore.location")
        return
    if kind in ("JKS", "JCEKS"):
        raise OptionError(
            f"{prefix}ssl.keystore.location = {location!r} is a {kind} key store, which "
            f"librdkafka cannot read: convert it with keytool -importkeystore -srckeystore "
            f"{location} -destkeystore keystore.p12 -deststoretype PKCS12 and set "
            f"{prefix}ssl.keystore.location=keystore.p12 with {prefix}ssl.keystore.password "
            f"(or extract PEM files with openssl pkcs12 for {prefix}ssl.certificate.location "
            f"and {prefix}ssl.key.location)."
        )
    raise OptionError(
        f"{prefix}ssl.keystore.type = {declared!r} is not supported: librdkafka reads PKCS12 "
        f"({prefix}ssl.keystore.location) or PEM ({prefix}ssl.certificate.location, "
        f"{prefix}ssl.key.location)."
    )
