"""What a user gets by default: `draftlight chat` (depth auto) against stock llama-completion with its defaults.

Both are run as a user runs them, one process per reply: `python -m engine.cli chat PROMPT --json`
and `llama-completion -m TARGET -f RENDERED -no-cnv`, built from the same pinned llama.cpp source
(`make oracle`; llama-completion is built here beside it if missing). llama-completion gets the
very bytes our engine renders from the chat template (-p, --no-escape; -no-cnv: it templates
nothing itself),
both write the same number of tokens past any end of turn (--ignore-eos), greedily, on the same
threads. A warm-up run of each first (ours measures the box there if no profile is saved),
then repeats interleaved with the order swapped each time; medians of decode tokens/s, and
their ratio. An arm with llama.cpp's defaults spelled out in our engine (`--fast --depth 0`)
and our exact mode's plain decoding (`--depth 0`) are measured alongside.

  python benchmarks/cpu_defaults.py [--tokens 128] [--repeats 5] [--prompt code]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EVAL = re.compile(r"eval time =\s*([\d.]+) ms /\s*(\d+) (?:runs|tokens)")
SUMMARY = re.compile(
    r"\[(?P<tokens>\d+) tokens, decode (?P<tps>[\d.]+) tok/s.*prefill \d+ ms for (?P<prompt>\d+) tokens"
)


def completion_binary() -> Path:
    from engine.ruler.oracle_build import build_oracle, find_oracle

    build = find_oracle() or build_oracle(progress=lambda m: print(m, file=sys.stderr))
    binary = build.bin_dir / "llama-completion"
    if not binary.exists():
        tree = build.bin_dir.parent
        subprocess.run(["cmake", "--build", str(tree), "--target", "llama-completion", "-j", str(os.cpu_count())],
                       check=True, capture_output=True)  # fmt: skip
    return binary


def ours(prompt: str, tokens: int, extra: list[str]) -> dict:
    """A user's `draftlight chat`, coloured text and all; its numbers from the summary line."""
    cmd = [sys.executable, "-m", "engine.cli", "chat", prompt, "--max-tokens", str(tokens), "--ignore-eos"]
    err = subprocess.run([*cmd, *extra], capture_output=True, text=True, cwd=ROOT, check=True).stderr
    found = SUMMARY.search(err)
    if found is None:
        raise SystemExit(f"no summary line from draftlight chat:\n{err}")
    return {"tps": float(found["tps"]), "prompt_tokens": int(found["prompt"]), "tokens": int(found["tokens"])}


def theirs(binary: Path, target: Path, rendered: str, tokens: int, threads: int) -> dict:
    cmd = [str(binary), "-m", str(target), "-p", rendered, "--no-escape", "-n", str(tokens), "--temp", "0",
           "--ignore-eos", "-no-cnv", "-t", str(threads), "--no-display-prompt"]  # fmt: skip
    log = subprocess.run(cmd, capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL).stderr
    (_, p_n), (e_ms, e_n) = [(float(a), int(b)) for a, b in EVAL.findall(log)[:2]]
    return {"tps": e_n / (e_ms / 1e3), "prompt_tokens": p_n, "tokens": e_n + 1}


def default_setup(doc: str | None) -> tuple[argparse.Namespace, str, Path, str, int, Path]:
    """The arguments, the prompt, the default target, the prompt's rendered bytes, the threads and stock
    llama-completion: what every benchmark against llama.cpp's default starts from."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--prompt", default="code", help="a built-in prompt of the ruler")
    args = ap.parse_args()

    from engine.chat import Message, template_for
    from engine.models import catalog
    from engine.ruler.prompts import built_in
    from engine.runtime import Model, RuntimeOptions

    text = built_in([args.prompt])[0].text
    target = catalog.resolve(catalog.DEFAULT_TARGET)
    threads = RuntimeOptions().threads
    vocab = Model(target, RuntimeOptions(), vocab_only=True)
    rendered = template_for(vocab).render([Message("user", text)])
    vocab.close()
    binary = completion_binary()
    return args, text, target, rendered, threads, binary


def main() -> int:
    args, text, target, rendered, threads, binary = default_setup(__doc__)
    arms = {
        "draftlight chat (default: depth auto)": lambda: ours(text, args.tokens, []),
        "llama-completion, its defaults": lambda: theirs(binary, target, rendered, args.tokens, threads),
        "draftlight chat --depth 0 --fast": lambda: ours(text, args.tokens, ["--depth", "0", "--fast"]),
        "draftlight chat --depth 0 (exact)": lambda: ours(text, args.tokens, ["--depth", "0"]),
    }
    runs: dict[str, list[dict]] = {name: [] for name in arms}
    for name, arm in arms.items():
        print(f"warm-up: {name}: {arm()['tps']:.1f} tok/s", file=sys.stderr)
    names = list(arms)
    for repeat in range(args.repeats):
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        for name in order:
            r = arms[name]()
            runs[name].append(r)
            print(f"[{repeat + 1}/{args.repeats}] {name}: {r['tps']:.1f} tok/s, prompt {r['prompt_tokens']}, "
                  f"{r['tokens']} tokens", file=sys.stderr)  # fmt: skip
    reference = statistics.median(r["tps"] for r in runs[names[1]])
    print(f"{args.prompt} prompt, {args.tokens} tokens, {threads} threads, median of {args.repeats}, interleaved")
    print("| arm | prompt tokens | decode tok/s (median) | runs | / llama-completion | per repeat: median, range |")
    print("|---|---:|---:|---|---:|---|")
    for name in names:
        tps = [r["tps"] for r in runs[name]]
        med = statistics.median(tps)
        # each repeat's arms ran minutes apart at most: their ratio drifts less than the speeds do
        ratios = [a["tps"] / b["tps"] for a, b in zip(runs[name], runs[names[1]])]
        print(f"| {name} | {runs[name][0]['prompt_tokens']} | {med:.1f} | {' '.join(f'{t:.1f}' for t in tps)} | "
              f"{med / reference:.2f} | {statistics.median(ratios):.2f}, {min(ratios):.2f}-{max(ratios):.2f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
