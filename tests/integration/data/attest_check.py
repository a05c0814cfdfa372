"""An independent check of a git forum attestation, with the reference Python libraries.

Usage: attest_check.py ENVELOPE PUBKEY

ENVELOPE is the DSSE envelope `git forum attest` wrote; PUBKEY the verifier key file
`git forum keygen` wrote (NAME+HASH+base64(0x01 || Ed25519 public key)). The envelope's
signature is checked by securesystemslib's DSSE Envelope with an ed25519 SSlibKey whose keyid is
NAME+HASH (what git forum writes as the envelope's keyid); the payload is then parsed by the
in-toto-attestation package: the Statement v1 proto and the SLSA Provenance v1 proto, both of
which refuse unknown fields, and the Statement's own validation. Prints `ok` and exits 0, or
prints what failed and exits 1.
"""

import base64
import json
import sys

from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey


def verifier_key(path):
    text = open(path, encoding="utf-8").read().strip()
    name, key_hash, b64 = text.split("+", 2)
    raw = base64.b64decode(b64, validate=True)
    if len(raw) != 33 or raw[0] != 1:
        raise ValueError("not an Ed25519 signed-note verifier key")
    keyid = name + "+" + key_hash
    return SSlibKey(keyid, "ed25519", "ed25519", {"public": raw[1:].hex()})


def check(envelope_path, key_path):
    with open(envelope_path, encoding="utf-8") as f:
        envelope = Envelope.from_dict(json.load(f))
    if envelope.payload_type != "application/vnd.in-toto+json":
        raise ValueError("payloadType is " + envelope.payload_type)
    envelope.verify([verifier_key(key_path)], 1)
    statement = json_format.Parse(envelope.payload, statement_pb2.Statement())
    Statement.copy_from_pb(statement).validate()
    predicate = json.loads(envelope.payload)["predicate"]
    provenance = json_format.ParseDict(predicate, provenance_pb2.Provenance())
    for rd in list(provenance.build_definition.resolved_dependencies) + list(
        provenance.run_details.byproducts
    ):
        ResourceDescriptor.copy_from_pb(rd).validate()
    if statement.predicate_type != "https://slsa.dev/provenance/v1":
        raise ValueError("predicateType is " + statement.predicate_type)


def main():
    if len(sys.argv) != 3:
        print("usage: attest_check.py ENVELOPE PUBKEY", file=sys.stderr)
        return 2
    try:
        check(sys.argv[1], sys.argv[2])
    except Exception as e:  # every failure is a refusal, named
        print("refused: %s: %s" % (type(e).__name__, e))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
