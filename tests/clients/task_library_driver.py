"""Runs one TFLite Task Library task on a model file and prints one JSON line (run by tests/clients/clients.py).

A separate process in a venv of its own: tflite-support 0.4.4 needs protobuf
3.20, TensorFlow 2.21 a newer one, so the two cannot share an interpreter.
Standard library and ``tflite_support`` only.

Usage:
    python task_library_driver.py bert_nl_classifier MODEL TEXT...
    python task_library_driver.py bert_question_answerer MODEL CONTEXT QUESTION
    python task_library_driver.py text_embedder MODEL TEXT...
"""

import json
import sys


def main(task, path, *inputs):
    from tflite_support.task import text

    if task == "bert_nl_classifier":
        client = text.BertNLClassifier.create_from_file(path)
        result = [{c.category_name: c.score for c in client.classify(t).classifications[0].categories}
                  for t in inputs]
    elif task == "bert_question_answerer":
        client = text.BertQuestionAnswerer.create_from_file(path)
        answers = client.answer(inputs[0], inputs[1]).answers
        result = [{"text": a.text, "start": a.pos.start, "end": a.pos.end, "logit": a.pos.logit} for a in answers]
    elif task == "text_embedder":
        client = text.TextEmbedder.create_from_file(path)
        result = [list(map(float, client.embed(t).embeddings[0].feature_vector.value)) for t in inputs]
    else:
        raise SystemExit(f"unknown task {task!r}")
    return result


if __name__ == "__main__":
    try:
        answer = {"ok": True, "result": main(*sys.argv[1:])}
    except Exception as err:  # noqa: BLE001  (the client's refusal is the answer)
        answer = {"ok": False, "error": f"{type(err).__name__}: {err}"}
    print(json.dumps(answer))
