"""schemathesis hooks for tests/it/http_schemathesis.rs (loaded through SCHEMATHESIS_HOOKS).

1. A serializer for `application/x-ndjson`, the body of POST /v1/import, which schemathesis has
   none of: the generated text goes on the wire as UTF-8, as a client would send a JSONL file.
2. A filter that drops generated searches whose `since` is after their `until`, a rule between
   fields that JSON Schema cannot state: the server refuses them with 400, and sent as
   "schema-valid" they would fail positive_data_acceptance although the server is right. (The
   fuzzing phase applies filters; the coverage phase's boundary values have since == until.)
"""

from datetime import datetime, timedelta, timezone

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogatepass")


def _time(value):
    """A date-time the body carries, or None when it is not one (a negative case)."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


@schemathesis.hook("filter_body").apply_to(method="POST", path="/v1/search")
def search_window_in_order(ctx, body):
    # `since` after `until` is refused: an empty window is a mistake, not a question.
    if not isinstance(body, dict):
        return True
    since, until = _time(body.get("since")), _time(body.get("until"))
    return since is None or until is None or since <= until
