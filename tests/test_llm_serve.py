"""The language model's command line and its OpenAI-compatible server, started as docs/LLM.md says and called with
the official `openai` client: answers streamed and not, several requests at once (each its own answer), malformed
requests and prompts past the context answered with 400 and OpenAI's error object, the server serving on after."""
import json
import pathlib
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import openai
import pytest
from test_llm import SMOLLM2, needs_model

pytestmark = pytest.mark.slow      # (a quick run deselects it: -m 'not slow')

ROOT = pathlib.Path(__file__).resolve().parent.parent

QUESTIONS = ["What is the capital of France?", "Name a primary color.", "What is 3 plus 4?"]


@pytest.fixture(scope="module")
def server():
    process = subprocess.Popen([sys.executable, "-m", "tinygrad_core.llm", "--serve", "0", "--max_context", "384"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)/v1", line)
    assert match, (line, process.stderr.read() if process.poll() is not None else "")
    url = f"http://127.0.0.1:{match.group(1)}/v1"
    yield url, openai.OpenAI(base_url=url, api_key="not needed")
    process.terminate()
    process.wait(timeout=30)


def ask(client, question: str, max_tokens: int = 12, **options):
    return client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": question}],
                                          max_tokens=max_tokens, temperature=0, **options)


def post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@needs_model
def test_the_server_answers_the_openai_client_streamed_and_not(server):
    url, client = server
    answer = ask(client, QUESTIONS[0])
    text = answer.choices[0].message.content
    assert "Paris" in text and answer.choices[0].finish_reason in ("stop", "length")
    assert answer.usage.prompt_tokens > 10 and 0 < answer.usage.completion_tokens <= 12
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in ask(client, QUESTIONS[0], stream=True)
                       if chunk.choices)
    assert streamed == text
    completion = client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=4,
                                           temperature=0)
    assert completion.choices[0].text.strip() and completion.usage.completion_tokens <= 4
    stopped = ask(client, QUESTIONS[0], stop=["France"])
    assert stopped.choices[0].finish_reason == "stop" and text.startswith(stopped.choices[0].message.content)
    assert "France" in text and "France" not in stopped.choices[0].message.content
    assert "France" not in stopped.choices[0].message.content and stopped.choices[0].finish_reason == "stop"
    assert [m.id for m in client.models.list().data] == ["SmolLM2-135M-Instruct.Q4_1.gguf"]


@needs_model
def test_requests_at_once_each_get_their_own_answer(server):
    url, client = server
    alone = [ask(client, q, max_tokens=6).choices[0].message.content for q in QUESTIONS]
    together: dict[int, str] = {}

    def one(i: int):
        together[i] = ask(client, QUESTIONS[i], max_tokens=6).choices[0].message.content
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(QUESTIONS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert [together[i] for i in range(len(QUESTIONS))] == alone


@needs_model
def test_malformed_requests_get_400_with_openais_error_object_and_the_server_goes_on(server):
    url, client = server
    cases = [b"{not json", b"[]", json.dumps({"messages": []}).encode(),
             json.dumps({"messages": [{"role": "user", "content": 3}]}).encode(),
             json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": -2}).encode(),
             json.dumps({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}).encode()]
    for body in cases:
        status, reply = post(f"{url}/chat/completions", body)
        assert status == 400 and set(reply["error"]) == {"message", "type", "param", "code"}, (body, reply)
        assert reply["error"]["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as error:
        ask(client, "hello " * 500)
    assert error.value.status_code == 400 and error.value.code == "context_length_exceeded"
    assert "Paris" in ask(client, QUESTIONS[0]).choices[0].message.content      # (still serving)


@needs_model
def test_the_command_line_completes_a_prompt_and_exits():
    done = subprocess.run([sys.executable, "-m", "tinygrad_core.llm", "--prompt", QUESTIONS[0], "--max-tokens", "12",
                           "--max_context", "256"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout
    done = subprocess.run([sys.executable, "-m", "tinygrad_core.cli", "llm", "--benchmark", "4", "--max_context",
                           "256"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert re.search(r"prefill: \d+ tokens in .* tokens/s", done.stdout), done.stdout
    assert re.search(r"decode: 4 tokens in .* tokens/s, weights 9\d\.\d MB a token read at .* GB/s", done.stdout)


@needs_model
def test_the_chat_answers_each_line_until_an_empty_one():
    done = subprocess.run([sys.executable, "-m", "tinygrad_core.llm", "--max-tokens", "12", "--max_context", "256"],
                          input=f"{QUESTIONS[0]}\nAnd of Italy?\n\nnot read\n", capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("> ")[1:3]
    assert "Paris" in first and "Rome" in second, done.stdout       # (the second answer knows the first question)


@needs_model
def test_the_docs_python_example_runs_as_written(tmp_path):
    code = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "LLM.md").read_text(), re.S).group(1)
    (tmp_path / SMOLLM2.name).symlink_to(SMOLLM2)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    *answer, shape = done.stdout.strip().splitlines()
    assert "".join(answer).strip() and shape.startswith("(") and shape.endswith(", 49152)"), done.stdout
