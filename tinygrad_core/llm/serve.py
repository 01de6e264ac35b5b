"""An OpenAI-compatible HTTP API on 127.0.0.1 (`--serve`): POST /v1/chat/completions and /v1/completions (streamed as
server-sent events with "stream": true), GET /v1/models. The thread that loaded the model runs it (a GPU context
belongs to its thread); requests are queued for it, so each answer is computed alone, from an empty cache, while the
HTTP threads take more. A malformed request, or a prompt past the context, gets status 400 with OpenAI's error
object, and the server goes on."""
from __future__ import annotations
import json
import queue
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RequestError(Exception):
    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.param, self.code = param, code


def _number(body: dict, name: str, kind, default, low=None, high=None):
    value = body.get(name, default)
    if value is None:
        return default
    wrong_kind = not isinstance(value, int if kind is int else (int, float)) or isinstance(value, bool)
    if wrong_kind or (low is not None and value < low) or (high is not None and value > high):
        raise RequestError(f"{name} must be {'an integer' if kind is int else 'a number'}"
                           f"{f' from {low}' if low is not None else ''}{f' to {high}' if high is not None else ''}, "
                           f"got {value!r}", name, "invalid_value")
    return kind(value)


class Server:
    def __init__(self, model, tokenizer, name: str):
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.jobs: queue.Queue = queue.Queue()     # (request, its answer's queue, set when its client has gone)

    def parse(self, body, chat: bool) -> dict:
        """The request's prompt tokens and settings, or RequestError saying what is wrong."""
        if not isinstance(body, dict):
            raise RequestError("the request body must be a JSON object")
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                    for m in messages):
                raise RequestError("messages must be a non-empty list of {role, content} objects with string "
                                   "values", "messages")
            tokens = self.tokenizer.encode_chat(messages)
        else:
            if not isinstance(prompt := body.get("prompt"), str):
                raise RequestError("prompt must be a string", "prompt")
            tokens = self.tokenizer.encode(prompt)
        stop = body.get("stop")
        stop = [stop] if isinstance(stop, str) else stop or []
        if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
            raise RequestError("stop must be a string or a list of non-empty strings", "stop")
        if len(tokens) >= self.model.max_context:
            raise RequestError(f"the prompt is {len(tokens)} tokens; this model's context holds "
                               f"{self.model.max_context} (prompt and answer)", "messages" if chat else "prompt",
                               "context_length_exceeded")
        room = self.model.max_context - len(tokens)
        return dict(tokens=tokens, stop=stop, stream=bool(body.get("stream", False)),
                    max_tokens=min(room, _number(body, "max_tokens", int, room, 1)),
                    sampling=dict(temperature=_number(body, "temperature", float, 1.0, 0, 2),
                                  top_p=_number(body, "top_p", float, 1.0, 0, 1),
                                  seed=_number(body, "seed", int, None)))

    def generate(self, request: dict):
        """Yields the answer's text piece by piece, and last ("", finish reason, completion tokens). Run by the
        model's thread only."""
        text, count, reason = "", 0, "length"
        for _, piece in self.model.complete(self.tokenizer, request["tokens"], request["max_tokens"],
                                 **request["sampling"]):
            count += 1
            text += piece
            if any(s in text for s in request["stop"]):         # the stop string and what follows it are cut
                cut = min(text.index(s) for s in request["stop"] if s in text)
                yield piece[:len(piece) - (len(text) - cut)]
                reason = "stop"
                break
            yield piece
        else:
            reason = "stop" if count < request["max_tokens"] else "length"
        yield "", reason, count

    def answer(self, request: dict):
        """The pieces of request's answer as the model's thread makes them (what an HTTP thread reads)."""
        answers, gone = queue.Queue(), threading.Event()
        self.jobs.put((request, answers, gone))
        try:
            while not isinstance(piece := answers.get(), (tuple, Exception)):
                yield piece
            if isinstance(piece, Exception):
                raise piece
            yield piece
        finally:
            gone.set()

    def run(self):
        """The model's loop: each queued request in turn (one whose client has gone is dropped where it is)."""
        while True:
            request, answers, gone = self.jobs.get()
            try:
                for piece in self.generate(request):
                    if gone.is_set():
                        break
                    answers.put(piece)
            except Exception as e:          # noqa: BLE001 (the client gets a 500 with the reason; the server goes on)
                answers.put(e)


def serve(model, tokenizer, port: int = 8000, name: str = "model", ready=None):
    """Serve until interrupted; ready(port) is called once the server listens (port 0: a free one)."""
    server = Server(model, tokenizer, name)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):       # (quiet: a request per line is noise in a terminal chat)
            pass

        def reply(self, status: int, body: dict):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def error(self, status: int, message: str, param=None, code=None, kind="invalid_request_error"):
            self.reply(status, {"error": {"message": message, "type": kind, "param": param, "code": code}})

        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                self.reply(200, {"object": "list", "data": [{"id": server.name, "object": "model", "created": 0,
                                                             "owned_by": "tinygrad-core"}]})
            else:
                self.error(404, f"no route GET {self.path}", code="not_found")

        def do_POST(self):
            chat = self.path.rstrip("/") == "/v1/chat/completions"
            if not chat and self.path.rstrip("/") != "/v1/completions":
                return self.error(404, f"no route POST {self.path}", code="not_found")
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
                request = server.parse(body, chat)
            except json.JSONDecodeError as e:
                return self.error(400, f"the request body is not JSON: {e}")
            except RequestError as e:
                return self.error(400, str(e), e.param, e.code)
            ident, created = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}", int(time.time())
            kind = "chat.completion" if chat else "text_completion"
            usage = lambda n: {"prompt_tokens": len(request["tokens"]), "completion_tokens": n,   # noqa: E731
                               "total_tokens": len(request["tokens"]) + n}

            def choice(text: str, reason, delta: bool):
                if not chat:
                    return {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
                content = {"content": text} if text or not delta else {}
                return {"index": 0, "finish_reason": reason, **({"delta": content} if delta else {
                    "message": {"role": "assistant", "content": text}})}

            if not request["stream"]:
                try:
                    pieces = list(server.answer(request))
                except Exception as e:          # noqa: BLE001
                    return self.error(500, f"generation failed: {type(e).__name__}: {e}", kind="server_error")
                _, reason, count = pieces.pop()
                return self.reply(200, {"id": ident, "object": kind, "created": created, "model": server.name,
                                        "choices": [choice("".join(pieces), reason, False)], "usage": usage(count)})
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def event(payload):
                data = f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            chunk = lambda choices, **more: {"id": ident, "object": kind + (".chunk" if chat else ""),  # noqa: E731
                                             "created": created, "model": server.name, "choices": choices, **more}
            if chat:
                event(chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]))
            for piece in server.answer(request):
                if isinstance(piece, tuple):
                    _, reason, count = piece
                    event(chunk([choice("", reason, True)], usage=usage(count)))
                elif piece:
                    event(chunk([choice(piece, None, True)]))
            event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print(f"serving {name} on http://127.0.0.1:{httpd.server_address[1]}/v1 (OpenAI API)", flush=True)
    if ready is not None:
        ready(httpd.server_address[1])
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.shutdown()
        httpd.server_close()
