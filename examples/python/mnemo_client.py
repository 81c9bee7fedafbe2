#!/usr/bin/env python3
"""A small client of `mnemo serve`: ingests a conversation, searches it, and asks for context.

It reads a JSONL file of conversation turns in the format POST /v1/events takes, stores them in
batches, then searches the memory (POST /v1/search) and prints each hit with the reasons it
ranked where it did, and finally prints the context block mnemo would put into a system prompt
(POST /v1/context).

Needs only httpx and the standard library:

    python mnemo_client.py --url http://127.0.0.1:8080 --key KEY \\
        --conversation conversation.jsonl --query "What does Clara play?"

`--url` and `--key` default to the environment variables MNEMO_URL and MNEMO_API_KEY.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx

# The server takes up to 1,000 events in one request.
MAX_BATCH = 1000


class MnemoError(Exception):
    """A request mnemo refused or failed, with the server's error code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"HTTP {status} ({code}): {message}")
        self.status = status
        self.code = code


class Mnemo:
    """The few calls of the mnemo HTTP API this example makes."""

    def __init__(self, url: str, key: str, timeout: float = 30.0) -> None:
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
        )

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self._http.post(path, json=body)
        if response.is_success:
            return response.json()
        try:
            error = response.json()["error"]
            code, message = error["code"], error["message"]
        except (ValueError, KeyError, TypeError):
            code, message = "unknown", response.text
        raise MnemoError(response.status_code, code, message)

    def store_events(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """POST /v1/events: stores a batch; returns one acknowledgement per event."""
        return self._post("/v1/events", {"events": events})["results"]

    def search(self, query: str, limit: int, mode: str) -> list[dict[str, Any]]:
        """POST /v1/search: the hits, best first."""
        return self._post("/v1/search", {"query": query, "limit": limit, "mode": mode})["hits"]

    def context(self, query: str) -> str:
        """POST /v1/context: the memory context for a prompt about `query`."""
        return self._post("/v1/context", {"query": query})["text"]


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events of a JSONL file; blank lines and `#` comments are skipped."""
    events = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise SystemExit(f"{path}:{number}: not JSON: {error}") from error
    return events


def batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def print_hit(rank: int, hit: dict[str, Any]) -> None:
    memory, why = hit["memory"], hit["why"]
    print(f"hit {rank}: [{memory['kind']}] {memory['content']}")
    print(f"    score {hit['score']:.4f} = (fused {why['fused']:.4f} x speaker {why['speaker']:.1f} "
          f"x period {why['period']:.1f} + neighbours {why['neighbours']:.4f} "
          f"+ session {why['session']:.4f}) x confidence weight {why['confidence_weight']:.2f}")
    for verdict in why["lists"]:
        print(f"    {verdict['list']}: rank {verdict['rank']}, score {verdict['score']:.4f}")


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("MNEMO_URL"),
                        help="the server, e.g. http://127.0.0.1:8080 (default: $MNEMO_URL)")
    parser.add_argument("--key", default=os.environ.get("MNEMO_API_KEY"),
                        help="a user's API key from `mnemo keys create` (default: $MNEMO_API_KEY)")
    parser.add_argument("--conversation", type=Path, default=here / "conversation.jsonl",
                        help="JSONL of /v1/events turns (default: the one beside this script)")
    parser.add_argument("--query", default="What instrument does Clara play?",
                        help="what to search for and to ask context about")
    parser.add_argument("--limit", type=int, default=5, help="most hits to print")
    parser.add_argument("--mode", default="hybrid", choices=["hybrid", "fts", "vector", "entity"],
                        help="how the search ranks (default: hybrid)")
    parser.add_argument("--batch", type=int, default=100,
                        help=f"events per request, 1 to {MAX_BATCH} (default: 100)")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("name the server with --url or MNEMO_URL")
    if not args.key:
        parser.error("give an API key with --key or MNEMO_API_KEY")
    if not 1 <= args.batch <= MAX_BATCH:
        parser.error(f"--batch must be between 1 and {MAX_BATCH}")

    events = read_events(args.conversation)
    client = Mnemo(args.url, args.key)
    try:
        stored = already = 0
        for batch in batches(events, args.batch):
            for result in client.store_events(batch):
                if result["stored"]:
                    stored += 1
                else:
                    already += 1
        print(f"ingested {len(events)} events from {args.conversation.name}: "
              f"{stored} stored, {already} stored before")

        hits = client.search(args.query, args.limit, args.mode)
        print(f"\nsearch {args.query!r} ({args.mode}): {len(hits)} hits")
        for rank, hit in enumerate(hits, start=1):
            print_hit(rank, hit)

        context = client.context(args.query)
        print("\ncontext block:")
        print(context if context else "(memory holds nothing relevant)")
    except MnemoError as error:
        print(f"mnemo_client: {error}", file=sys.stderr)
        return 1
    except httpx.HTTPError as error:
        print(f"mnemo_client: cannot reach {args.url}: {error}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
