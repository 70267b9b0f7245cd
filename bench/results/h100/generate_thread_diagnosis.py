"""Inside a trained-once GRPOTrainer (accelerate has prepared the model): one 32 x 48 turn, several ways."""
import os, sys, time, threading, copy, statistics
sys.path.insert(0, "bench")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
import torch
import trl_rollout_overhead as b
from gem_core.rollout import ChatTemplate
from gem_core.rollout.policy import TransformersPolicy, SamplingParams
from trl.models.utils import unwrap_model_for_generation

shape = sys.argv[1] if len(sys.argv) > 1 else "qwen3-0.6b"
rows, tokens = int(os.environ.get("ROWS", 32)), int(os.environ.get("TOKENS", 48))
device = "cuda" if torch.cuda.is_available() else "cpu"
args = b.parse_args(["--shapes", shape, "--prompts", str(max(1, rows // 8)), "--generations", str(min(8, rows)), "--turn-tokens", str(tokens)])
tokenizer, _ = b.load_tokenizer()
model = b.build_model(shape, args.vocab, tokenizer, 0)
import tempfile
trainer = b.make_trainers(args, model, tokenizer, device, tempfile.mkdtemp())["stock"][0]
trainer.args.max_steps = 1
trainer.train()
prompt = ChatTemplate.for_tokenizer(tokenizer).initial_ids("I am thinking of an integer between 1 and 20. Guess it.")
prompts = [prompt] * rows
ids = torch.tensor(prompts, device=device)
sampling = SamplingParams(max_new_tokens=tokens, temperature=1.0, top_p=1.0, top_k=0)
m = trainer.accelerator.unwrap_model(trainer.model)
print("forward:", m.forward, "| has _original_forward:", "_original_forward" in m.__dict__, "| autocast on main thread:", torch.is_autocast_enabled("cuda") if device == "cuda" else None, flush=True)
def sync():
    if device == "cuda": torch.cuda.synchronize()
def timed(name, fn, n=3):
    fn(); sync(); ts = []
    for _ in range(n):
        s = time.perf_counter(); fn(); sync(); ts.append(time.perf_counter() - s)
    print(f"{name:<58} {min(ts):.3f} s (median {statistics.median(ts):.3f})", flush=True)
def in_thread(fn):
    def run():
        t = threading.Thread(target=fn); t.start(); t.join()
    return run
policy = TransformersPolicy(m, tokenizer, max_batch_size=rows, logprobs=False)
config = copy.deepcopy(trainer.generation_config); config.max_new_tokens = config.min_new_tokens = tokens
def stock_like():
    with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator, generation_kwargs=trainer.generation_kwargs) as u, torch.no_grad():
        u.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
timed("stock-like (TRL's unwrap + generation_config), main", stock_like)
timed("stock-like, worker thread", in_thread(stock_like))
timed("GEM policy.sample_batch, worker thread", in_thread(lambda: policy.sample_batch(prompts, sampling, tokens)))
timed("GEM policy.sample_batch, main thread", lambda: policy.sample_batch(prompts, sampling, tokens))
wrapped = m.forward
if "_original_forward" in m.__dict__:
    m.forward = m._original_forward
    timed("GEM policy, forward without accelerate's autocast, worker", in_thread(lambda: policy.sample_batch(prompts, sampling, tokens)))
    m.forward = wrapped
