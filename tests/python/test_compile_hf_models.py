"""torch.compile(model, backend="pypto") over Hugging Face architectures built from tiny
random configs (no downloads): encoder-only, decoder-only (GQA, RoPE, sliding window,
ALiBi, multi-query), encoder-decoder, vision, audio and mixture-of-experts models, in
evaluation and in one training step. Each output, loss and gradient equals eager pto's and
eager CPU's; a node the backend cannot lower runs eagerly with a counted reason; nothing
raises.

The architectures run in a child interpreter (this file run as a script, with their
names), one after another, each printing its report as it finishes: importing torch and
transformers' models takes a child about 9 s, more than most architectures' checks. A
crash fails its own case: the architectures after it go on in a fresh child. Run with
`--table` instead, it measures every architecture and prints the table of
docs/COMPILED_MODELS.md.
"""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
import traceback

import pytest
import torch
import torch.utils._pytree as pytree
from torch.testing import assert_close

SEQ = 12  # tokens per sequence: longer than Mistral's sliding window, short enough to be quick
VOCAB = 100


def _tokens():
    """Two sequences of SEQ tokens, the second padded after 9."""
    torch.manual_seed(1)
    attention_mask = torch.ones(2, SEQ, dtype=torch.long)
    attention_mask[1, 9:] = 0
    return {"input_ids": torch.randint(3, VOCAB, (2, SEQ)), "attention_mask": attention_mask}


def _lm_labels(inputs):
    """Labels for a language-model loss: the tokens, -100 (ignored) where padded."""
    labels = inputs["input_ids"].clone()
    labels[inputs["attention_mask"] == 0] = -100
    return {**inputs, "labels": labels}


def _class_labels(inputs):
    """One of the 3 classes (num_labels=3) per example."""
    torch.manual_seed(2)
    return {**inputs, "labels": torch.randint(0, 3, (2,))}


def _decoder_tokens():
    torch.manual_seed(2)
    return torch.randint(3, VOCAB, (2, 7))


def _with_decoder_tokens(encoder_inputs):
    """An encoder-decoder model's evaluation inputs: encoder inputs, decoder tokens."""
    return lambda: {**encoder_inputs(), "decoder_input_ids": _decoder_tokens()}


def _seq2seq(inputs):
    """Encoder inputs and decoder labels: the decoder tokens, which the model shifts
    right into its decoder inputs."""
    encoder_inputs = {name: value for name, value in inputs.items() if name != "decoder_input_ids"}
    return {**encoder_inputs, "labels": inputs["decoder_input_ids"]}


def _pixels(size=16):
    torch.manual_seed(1)
    return {"pixel_values": torch.randn(2, 3, size, size)}


# The models, on the CPU, from tiny configs: every dropout probability 0, so that eager
# CPU, eager pto and compiled pto are comparable in training too.

def bert():
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    return BertForMaskedLM(cfg)


def roberta():
    from transformers import RobertaConfig, RobertaForSequenceClassification

    cfg = RobertaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, num_labels=3)
    return RobertaForSequenceClassification(cfg)


def distilbert():
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    cfg = DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64,
                           dropout=0.0, attention_dropout=0.0)
    return DistilBertForMaskedLM(cfg)


def albert():
    from transformers import AlbertConfig, AlbertForMaskedLM

    cfg = AlbertConfig(vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)
    return AlbertForMaskedLM(cfg)


DECODER = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               max_position_embeddings=64, use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def llama():
    """Grouped-query attention (2 key/value heads for 4 query heads) and RoPE."""
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(**DECODER, num_key_value_heads=2))


def mistral():
    """A sliding window of 4 tokens, shorter than the sequence."""
    from transformers import MistralConfig, MistralForCausalLM

    return MistralForCausalLM(MistralConfig(**DECODER, num_key_value_heads=2, sliding_window=4))


def qwen2():
    """GQA with biases on the query, key and value projections."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return Qwen2ForCausalLM(Qwen2Config(**DECODER, num_key_value_heads=2))


def bloom():
    """ALiBi position biases instead of position embeddings."""
    from transformers import BloomConfig, BloomForCausalLM

    cfg = BloomConfig(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0,
                      use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return BloomForCausalLM(cfg)


def gpt_neox():
    """Rotary embeddings on a quarter of each head, parallel residual."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    cfg = GPTNeoXConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, rotary_pct=0.25, attention_dropout=0.0,
                        hidden_dropout=0.0, use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return GPTNeoXForCausalLM(cfg)


def falcon():
    """Multi-query attention (one key/value head) with RoPE."""
    from transformers import FalconConfig, FalconForCausalLM

    cfg = FalconConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, multi_query=True,
                       attention_dropout=0.0, hidden_dropout=0.0, use_cache=False, pad_token_id=0, bos_token_id=1,
                       eos_token_id=2)
    return FalconForCausalLM(cfg)


def phi():
    """Rotary embeddings on half of each head, parallel attention and feed-forward."""
    from transformers import PhiConfig, PhiForCausalLM

    cfg = PhiConfig(**DECODER, partial_rotary_factor=0.5, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0)
    return PhiForCausalLM(cfg)


# Experts run one after another ("eager"), each on the tokens routed to it. The default,
# grouped_mm, counts tokens per expert with histc on int32 on every device but the CPU,
# which eager pto (through its CPU fallback) cannot: that would fail eager pto itself.
MOE = dict(DECODER, num_key_value_heads=2, num_experts_per_tok=2, experts_implementation="eager")


def mixtral():
    """Four experts, two per token: the router's top-k picks them."""
    from transformers import MixtralConfig, MixtralForCausalLM

    return MixtralForCausalLM(MixtralConfig(**MOE, num_local_experts=4))


def qwen2_moe():
    """Four routed experts, two per token, and a gated shared expert."""
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    return Qwen2MoeForCausalLM(Qwen2MoeConfig(**MOE, num_experts=4, moe_intermediate_size=32,
                                              shared_expert_intermediate_size=64))


def t5():
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                   relative_attention_num_buckets=8, relative_attention_max_distance=16, dropout_rate=0.0,
                   use_cache=False, pad_token_id=0, eos_token_id=2, decoder_start_token_id=0)
    return T5ForConditionalGeneration(cfg)


def bart():
    from transformers import BartConfig, BartForConditionalGeneration

    cfg = BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                     dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, use_cache=False, pad_token_id=0,
                     bos_token_id=1, eos_token_id=2, decoder_start_token_id=2)
    return BartForConditionalGeneration(cfg)


def vit():
    from transformers import ViTConfig, ViTForImageClassification

    cfg = ViTConfig(image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3)
    return ViTForImageClassification(cfg)


def convnext():
    from transformers import ConvNextConfig, ConvNextForImageClassification

    cfg = ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, patch_size=2, drop_path_rate=0.0,
                         num_labels=3)
    return ConvNextForImageClassification(cfg)


def resnet():
    """Batch norm: its running statistics are compared too, after the training step."""
    from transformers import ResNetConfig, ResNetForImageClassification

    cfg = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", num_labels=3)
    return ResNetForImageClassification(cfg)


def _audio():
    torch.manual_seed(1)
    return {"input_values": torch.randn(2, 400)}


def wav2vec2():
    """Convolutional feature encoder, grouped positional convolution, CTC loss.
    SpecAugment's random masking is off: training would not be deterministic."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    cfg = Wav2Vec2Config(vocab_size=20, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                         num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2, hidden_dropout=0.0,
                         activation_dropout=0.0, attention_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0,
                         layerdrop=0.0, mask_time_prob=0.0, mask_feature_prob=0.0, pad_token_id=0,
                         ctc_loss_reduction="mean")
    return Wav2Vec2ForCTC(cfg)


def _ctc_labels(inputs):
    torch.manual_seed(2)
    return {**inputs, "labels": torch.randint(1, 20, (2, 5))}


def whisper():
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    cfg = WhisperConfig(vocab_size=VOCAB, num_mel_bins=8, d_model=32, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                        max_source_positions=16, max_target_positions=32, dropout=0.0, attention_dropout=0.0,
                        activation_dropout=0.0, use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                        decoder_start_token_id=1)
    return WhisperForConditionalGeneration(cfg)


def _features():
    torch.manual_seed(1)
    return {"input_features": torch.randn(2, 8, 32)}  # 8 mel bins, 2 x max_source_positions frames


ARCHITECTURES = {  # name: (family, model, inputs for evaluation, the same with a training loss's labels)
    "bert": ("encoder", bert, _tokens, _lm_labels),
    "roberta": ("encoder", roberta, _tokens, _class_labels),
    "distilbert": ("encoder", distilbert, _tokens, _lm_labels),
    "albert": ("encoder", albert, _tokens, _lm_labels),
    "llama": ("decoder: GQA, RoPE", llama, _tokens, _lm_labels),
    "mistral": ("decoder: sliding window, GQA", mistral, _tokens, _lm_labels),
    "qwen2": ("decoder: GQA, RoPE, qkv bias", qwen2, _tokens, _lm_labels),
    "bloom": ("decoder: ALiBi", bloom, _tokens, _lm_labels),
    "gpt_neox": ("decoder: partial RoPE", gpt_neox, _tokens, _lm_labels),
    "falcon": ("decoder: multi-query, RoPE", falcon, _tokens, _lm_labels),
    "phi": ("decoder: partial RoPE", phi, _tokens, _lm_labels),
    "mixtral": ("mixture of experts", mixtral, _tokens, _lm_labels),
    "qwen2_moe": ("mixture of experts, shared expert", qwen2_moe, _tokens, _lm_labels),
    "t5": ("encoder-decoder", t5, _with_decoder_tokens(_tokens), _seq2seq),
    "bart": ("encoder-decoder", bart, _with_decoder_tokens(_tokens), _seq2seq),
    "vit": ("vision", vit, _pixels, _class_labels),
    "convnext": ("vision", convnext, lambda: _pixels(32), _class_labels),
    "resnet": ("vision, batch norm", resnet, lambda: _pixels(32), _class_labels),
    "wav2vec2": ("audio", wav2vec2, _audio, _ctc_labels),
    "whisper": ("audio, encoder-decoder", whisper, _with_decoder_tokens(_features), _seq2seq),
}

# float32 throughout. The compiled graph fuses what eager runs op by op and sums in
# another order (tiled matrix products, reductions kept in registers), so its results
# differ from eager's in the last bits. Over all outputs, losses and gradients of these
# models the largest difference from eager CPU measured is 6.4e-6 (Wav2Vec2's, through
# its convolutions; below 1e-6 for most: docs/COMPILED_MODELS.md). 1e-4 leaves room for
# other seeds and still catches a wrong lowering (a lost mask changes attention outputs
# by their own order of magnitude).
TOL = dict(rtol=1e-4, atol=1e-4)


# The child: one architecture, evaluation then training -------------------------------------

def _leaves(output) -> dict:
    """The tensors of a model output (a ModelOutput or tuple), by their path."""
    values = output.to_tuple() if hasattr(output, "to_tuple") else output
    flat, _ = pytree.tree_flatten_with_path(values)
    return {pytree.keystr(path): leaf for path, leaf in flat if isinstance(leaf, torch.Tensor)}


def _to(inputs: dict, device: str) -> dict:
    return {name: value.to(device) for name, value in inputs.items()}


class Comparison:
    """assert_close of compiled results against eager ones, remembering the largest
    absolute difference against eager CPU."""

    def __init__(self):
        self.largest = 0.0

    def close(self, actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
        assert actual.device.type == "pto", f"{what} on {actual.device}"
        actual = actual.detach().cpu()
        if expected.device.type == "cpu":
            self.largest = max(self.largest, (actual.double() - expected.double()).abs().max().item())
        assert_close(actual, expected.detach().cpu(), **TOL, msg=lambda m: f"{what}: {m}")

    def outputs(self, actual, expected, against: str) -> None:
        actual, expected = _leaves(actual), _leaves(expected)
        assert actual.keys() == expected.keys(), f"outputs {sorted(actual)}, eager {against}'s {sorted(expected)}"
        for path, tensor in expected.items():
            self.close(actual[path], tensor, f"output{path} against eager {against}")

    def gradients(self, actual_model, expected_model, against: str) -> None:
        """Every parameter's gradient (None where eager's is None), and the buffers
        (batch norm's running statistics, updated by the training step)."""
        expected = dict(expected_model.named_parameters())
        for name, param in actual_model.named_parameters():
            if expected[name].grad is None:
                assert param.grad is None, f"{name} has a gradient, eager {against}'s has none"
            else:
                assert param.grad is not None, f"{name}: no gradient"
                self.close(param.grad, expected[name].grad, f"gradient of {name} against eager {against}")
        buffers = dict(actual_model.named_buffers())
        for name, buffer in expected_model.named_buffers():
            self.close(buffers[name], buffer, f"buffer {name} against eager {against}")


def _train_step(model, inputs: dict) -> torch.Tensor:
    """The loss of one forward and backward pass (gradients left in the parameters)."""
    loss = model(**inputs).loss
    loss.backward()
    return loss


def run_architecture(name: str) -> dict:
    """Evaluation and one training step of `name`, compiled with the pypto backend, against
    eager pto and eager CPU. Returns the report: whether each passed (or what went wrong),
    the largest difference from eager CPU, and the nodes that ran eagerly and why."""
    import pypto_torch
    from compile_models import on_device
    from pypto_torch.compile.backend import make_backend

    pypto_torch.set_fallback_mode("silent")
    family, build, make_inputs, with_labels = ARCHITECTURES[name]
    torch.manual_seed(0)
    model = build().eval()
    inputs = make_inputs()
    graphs = []  # the pypto backend's, as backend="pypto" compiles them; kept to read their plans
    backend = make_backend(on_graph=graphs.append)
    report = {"architecture": name, "family": family}
    compare = Comparison()

    def check(mode, run):
        torch._dynamo.reset()
        started = time.perf_counter()
        try:
            run()
            report[mode] = "ok"
        except Exception as error:  # reported with the check that failed; the case fails
            report[mode] = f"{type(error).__name__}: {error}"
            traceback.print_exc()
        report[f"{mode} seconds"] = round(time.perf_counter() - started, 1)

    def evaluate():
        with torch.no_grad():
            expected_cpu = model(**inputs)
            dut = on_device(model, "pto")
            expected_pto = dut(**_to(inputs, "pto"))
            actual = torch.compile(dut, backend=backend)(**_to(inputs, "pto"))
        compare.outputs(actual, expected_pto, "pto")
        compare.outputs(actual, expected_cpu, "CPU")

    def train():
        labelled = with_labels(inputs)
        cpu, eager, dut = model.train(), on_device(model, "pto").train(), on_device(model, "pto").train()
        expected_cpu = _train_step(cpu, labelled)
        expected_pto = _train_step(eager, _to(labelled, "pto"))
        actual = _train_step(torch.compile(dut, backend=backend), _to(labelled, "pto"))
        compare.close(actual, expected_pto, "loss against eager pto")
        compare.close(actual, expected_cpu, "loss against eager CPU")
        compare.gradients(dut, eager, "pto")
        compare.gradients(dut, cpu, "CPU")

    check("eval", evaluate)
    check("train", train)
    reasons = collections.Counter()
    for graph in graphs:
        for plan in graph.plans.values():
            reasons.update(why for _, why in (plan.fallback_nodes if plan is not None else ()))
        reasons.update(f"whole graph eagerly: {why}" for _, why in graph.unplanned.values())
    report.update({"graphs": len(graphs), "largest difference": compare.largest,
                   "nodes run eagerly": sum(reasons.values()), "reasons": dict(reasons.most_common())})
    return report


# The parent: children that run the architectures in turn ----------------------------------

# Long enough for every architecture on a loaded 2-core machine (the slowest takes about
# a minute there); a child past it fails the architecture it was on.
CHILD_SECONDS_PER_ARCHITECTURE = 300


def run_in_child(names: list[str]) -> tuple[dict[str, dict], subprocess.CompletedProcess]:
    """The reports of `names`, run in turn in one fresh interpreter, for each that
    finished: the child stops at the first that crashes it (or times out)."""
    command = [sys.executable, os.path.abspath(__file__), *names]
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=CHILD_SECONDS_PER_ARCHITECTURE * len(names),
                                cwd=os.path.dirname(os.path.abspath(__file__)),
                                env={**os.environ, "HF_HUB_OFFLINE": "1", "PTO_FALLBACK": "silent"})
    except subprocess.TimeoutExpired as expired:  # its output so far comes as bytes, text mode or not
        result = subprocess.CompletedProcess(command, f"killed after {expired.timeout} s",
                                             _text(expired.stdout), _text(expired.stderr))
    reports = [json.loads(line) for line in result.stdout.splitlines() if line.startswith('{"architecture": ')]
    return {report["architecture"]: report for report in reports}, result


def _text(output: bytes | None) -> str:
    return output.decode(errors="replace") if output else ""


_RUNS: dict[str, tuple[dict | None, subprocess.CompletedProcess]] = {}


def report_of(name: str, selected: list[str]) -> tuple[dict | None, subprocess.CompletedProcess]:
    """`name`'s report (None if its child died on it) and its child's run. The first
    case asked for starts a child on it and on the `selected` architectures after it not
    yet run."""
    if name not in _RUNS:
        pending = [n for n in selected[selected.index(name):] if n not in _RUNS]
        reports, result = run_in_child(pending)
        for n in pending:
            if n in reports:
                _RUNS[n] = (reports[n], result)
        _RUNS.setdefault(name, (None, result))
    return _RUNS[name]


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_compiled_model_matches_eager_in_eval_and_training(name, request):
    selected = [item.callspec.params["name"] for item in request.session.items
                if item.originalname == request.node.originalname and item.path == request.node.path]
    report, result = report_of(name, selected)
    assert report is not None, f"exit status {result.returncode}, no report:\n{result.stderr[-4000:]}"
    assert (report["eval"], report["train"]) == ("ok", "ok"), f"{json.dumps(report, indent=1)}\n{result.stderr[-4000:]}"


def table() -> str:
    """The architectures' table of docs/COMPILED_MODELS.md, measured now."""
    rows = ["| architecture | family | eval | train | graphs | nodes run eagerly | why | seconds (eval, train) "
            "| largest difference from eager CPU |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in ARCHITECTURES:
        report, result = report_of(name, list(ARCHITECTURES))
        if report is None:
            rows.append(f"| {name} | {ARCHITECTURES[name][0]} | crashed (exit {result.returncode}) | | | | | | |")
            continue
        why = "<br>".join(f"{count} × {reason}" for reason, count in report["reasons"].items())
        eval_ok, train_ok = (report[mode].splitlines()[0].replace("|", "\\|") for mode in ("eval", "train"))
        rows.append(f"| {name} | {report['family']} | {eval_ok} | {train_ok} | {report['graphs']} "
                    f"| {report['nodes run eagerly']} | {why} | {report['eval seconds']}, {report['train seconds']} "
                    f"| {report['largest difference']:.1e} |")
    return "\n".join(rows)


if __name__ == "__main__":
    if sys.argv[1:] == ["--table"]:
        print(table())
    else:
        for name in sys.argv[1:]:
            print(json.dumps(run_architecture(name)), flush=True)
