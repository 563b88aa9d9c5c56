"""gelus.audit and ``gelus audit`` on tiny transformers models (BERT: exact GELU modules; GPT-2:
gelu_new, the tanh form; Whisper: functional F.gelu calls in its convolution stem) and on small
torch modules. The oracle of a swap is the model with that site replaced by hand (a deep copy
holding torch's nn.GELU of the other form, or a forward written out), and the relative change is
recomputed here with numpy. No weights downloaded, no network."""

import copy
import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers reads it: nothing may touch the network

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gelus
from gelus._audit import _module_sites, _Runner
from gelus.cli import main
from torchvision_stand_in import import_modules

TOKENS = torch.tensor([[1, 5, 9, 3, 7, 2, 8, 4, 11, 6], [6, 2, 3, 11, 1, 0, 9, 5, 4, 10]])


@pytest.fixture(scope="module")
def hf():
    modules, _ = import_modules(
        "transformers",
        "transformers.models.auto.modeling_auto",
        "transformers.models.bert.modeling_bert",
        "transformers.models.gpt2.modeling_gpt2",
        "transformers.models.whisper.modeling_whisper",
    )
    return dict(zip(("transformers", "auto", "bert", "gpt2", "whisper"), modules, strict=True))


def bert_config(hf):
    return hf["bert"].BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32, hidden_act="gelu",
    )  # fmt: skip


def bert(hf):
    torch.manual_seed(0)
    return hf["bert"].BertModel(bert_config(hf))


def gpt2(hf):
    torch.manual_seed(0)
    config = hf["gpt2"].GPT2Config(
        vocab_size=40, n_embd=16, n_layer=2, n_head=2, n_positions=32, use_cache=False,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    assert config.activation_function == "gelu_new"
    return hf["gpt2"].GPT2Model(config)


def relative_change(base: list[torch.Tensor], other: list[torch.Tensor]) -> tuple[float, float]:
    """The oracle of a Change: per output, max |Δ| and RMS(Δ) over the output's RMS; the worst."""
    largest, rms = [], []
    for b, o in zip(base, other, strict=True):
        b, o = b.detach().numpy().astype(np.float64), o.detach().numpy().astype(np.float64)
        scale = np.sqrt(np.mean(b**2))
        largest.append(np.max(np.abs(o - b)) / scale)
        rms.append(np.sqrt(np.mean((o - b) ** 2)) / scale)
    return max(largest), max(rms)


def fingerprint(model: nn.Module) -> list:
    """Everything audit could disturb: modules, their attributes, flags, hooks and tensors."""
    return [
        (
            name, id(module), type(module), module.training, dict(module.__dict__.items()),
            {k: id(v) for k, v in module._forward_hooks.items()},
            {k: (id(v), v.detach().clone()) for k, v in module.named_parameters(recurse=False)},
            {k: (id(v), v.clone()) for k, v in module.named_buffers(recurse=False)},
        )
        for name, module in model.named_modules(remove_duplicate=False)
    ]  # fmt: skip


def assert_unchanged(before: list, after: list) -> None:
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        assert old[:4] == new[:4]
        assert old[4].keys() == new[4].keys() and all(
            old[4][k] is new[4][k] for k in old[4] if k not in ("_parameters", "_buffers")
        ), old[0]
        assert old[5] == new[5]
        for tensors_old, tensors_new in ((old[6], new[6]), (old[7], new[7])):
            assert tensors_old.keys() == tensors_new.keys()
            for key, (identity, value) in tensors_old.items():
                assert tensors_new[key][0] == identity and torch.equal(tensors_new[key][1], value)


def outputs(model: nn.Module, names: list[str], **inputs) -> list[torch.Tensor]:
    model.eval()
    with torch.no_grad():
        out = model(**inputs)
    return [out[name] for name in names]


def test_bert_exact_sites_and_what_the_tanh_trained_checkpoint_differs_by(hf):
    model = bert(hf)
    model.train()
    hook_calls = []
    act = model.encoder.layer[1].intermediate.intermediate_act_fn
    act.register_forward_hook(lambda m, i, o: hook_calls.append(1))
    before = fingerprint(model)
    report = gelus.audit(model, input_ids=TOKENS, trained_with="gelu_new")
    assert_unchanged(before, fingerprint(model))
    assert all(m.training for m in model.modules())  # the flags put back
    assert hook_calls  # the user's hook ran during the audit and is still registered

    names = [f"encoder.layer.{i}.intermediate.intermediate_act_fn" for i in range(2)]
    assert [(s.kind, s.name, s.form, s.what, s.calls) for s in report.sites] == [
        ("module", n, "exact", "transformers:GELUActivation", 1) for n in names
    ]  # GELUActivation's own F.gelu call is the module's site, not a second one
    assert report.counts() == {"exact": 2}
    assert [n for n, _ in report.outputs] == ["last_hidden_state", "pooler_output"]
    assert report.trained_with == "tanh" and [s.name for s in report.differing] == names

    # oracle: the model as trained, each GELUActivation replaced by torch's tanh-form nn.GELU
    trained = copy.deepcopy(model)
    for layer in trained.encoder.layer:
        layer.intermediate.intermediate_act_fn = nn.GELU(approximate="tanh")
    wanted = ["last_hidden_state", "pooler_output"]
    expected = relative_change(
        outputs(copy.deepcopy(model), wanted, input_ids=TOKENS),
        outputs(trained, wanted, input_ids=TOKENS),
    )
    assert report.mismatch is not None and report.mismatch.max > 1e-7
    assert (report.mismatch.max, report.mismatch.rms) == pytest.approx(expected, rel=1e-9)
    assert report.whole["tanh"] == report.mismatch
    assert report.noise.max == 0.0
    text = str(report)
    assert "trained with tanh: 2 of 2 GELU sites compute another form (exact ×2)" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_gpt2_tanh_site_swapped_to_exact_matches_the_model_with_that_site_replaced(hf):
    model = gpt2(hf)
    before = fingerprint(model)
    report = gelus.audit(model, input_ids=TOKENS)
    assert_unchanged(before, fingerprint(model))
    assert [(s.name, s.form, s.what) for s in report.sites] == [
        (f"h.{i}.mlp.act", "tanh", "transformers:NewGELUActivation") for i in range(2)
    ]
    site = report.sites[0]
    assert set(site.changes) == {"exact", "sigmoid"}

    by_hand = copy.deepcopy(model)
    by_hand.h[0].mlp.act = nn.GELU()  # the exact form, at this site only
    names = ["last_hidden_state"]
    expected = relative_change(
        outputs(copy.deepcopy(model), names, input_ids=TOKENS),
        outputs(by_hand, names, input_ids=TOKENS),
    )
    change = site.changes["exact"]
    assert change.max > 1e-7 and change.output == "last_hidden_state"
    assert (change.max, change.rms) == pytest.approx(expected, rel=1e-9)
    # x·σ(1.702x) is ~40x farther from the tanh form than the exact GELU is
    assert site.changes["sigmoid"].max > 5 * change.max
    assert set(report.whole) == {"exact", "sigmoid"}  # every site computes tanh already


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for _ in range(2):  # one call site, two calls
            h = F.gelu(self.fc(h))
        return h


class Net(nn.Module):
    """A module site (tanh), a functional F.gelu site called twice, an F.silu site."""

    def __init__(self) -> None:
        super().__init__()
        self.inp, self.act, self.block, self.out = (
            nn.Linear(4, 8),
            nn.GELU("tanh"),
            Block(),
            nn.Linear(8, 3),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.silu(self.block(self.act(self.inp(x)))))


def by_hand(net: Net, x: torch.Tensor, block_form: str) -> torch.Tensor:
    """Net's forward written out, the block's F.gelu computed in ``block_form``."""
    with torch.no_grad():
        h = F.gelu(net.inp(x), approximate="tanh")
        for _ in range(2):
            h = F.gelu(net.block.fc(h), approximate=block_form)
        return net.out(F.silu(h))


def test_functional_calls_are_sites_and_their_swap_matches_the_forward_by_hand():
    torch.manual_seed(1)
    net, x = Net(), torch.randn(32, 4)
    report = gelus.audit(net, x, trained_with="exact")
    assert [(s.kind, s.name, s.form, s.calls) for s in report.sites] == [
        ("module", "act", "tanh", 1),  # nn.GELU's own F.gelu is not a second site
        ("call", "block", "exact", 2),
        ("call", "", "silu", 1),
    ]
    block = report.sites[1]
    assert block.what == "F.gelu(approximate='none')" and "(Block.forward)" in block.code
    assert report.sites[2].changes == {}  # SiLU is not swapped between GELU forms
    expected = relative_change([by_hand(net, x, "none")], [by_hand(net, x, "tanh")])
    assert (block.changes["tanh"].max, block.changes["tanh"].rms) == pytest.approx(
        expected, rel=1e-9
    )
    assert [s.name for s in report.differing] == ["act"]


def test_an_identity_swap_changes_nothing():
    """Each site served in its own form by torch's function (module and call): the same bits."""
    torch.manual_seed(2)
    net, x = Net(), torch.randn(32, 4)
    modules = _module_sites(net)
    runner = _Runner(net, modules, (x,), {})
    with torch.no_grad():
        base = runner.forward([])
        sites = modules + runner.call_sites()
        gelu_sites = [site for site in sites if site.is_gelu]
        assert len(gelu_sites) == 2
        for swaps in ([(s, s.form)] for s in gelu_sites):
            assert torch.equal(runner.forward(swaps)[0][1], base[0][1])
        swapped = runner.forward([(gelu_sites[1], "tanh")])[0][1]
    assert not torch.equal(swapped, base[0][1])  # the swap reaches the call site
    assert torch.equal(swapped, by_hand(net, x, "tanh"))


def test_whisper_convolution_stem_calls_are_found(hf):
    config = hf["whisper"].WhisperConfig(
        vocab_size=40, num_mel_bins=8, d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
        decoder_ffn_dim=32, max_source_positions=8, max_target_positions=16, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, use_cache=False,
    )  # fmt: skip
    torch.manual_seed(0)
    model = hf["whisper"].WhisperModel(config)
    features = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(3))
    report = gelus.audit(model, input_features=features, decoder_input_ids=TOKENS[:, :4])
    calls = [s for s in report.sites if s.kind == "call"]
    assert [(s.name, s.what, s.calls) for s in calls] == [
        ("encoder", "F.gelu(approximate='none')", 1)
    ] * 2
    assert calls[0].code != calls[1].code  # two lines: after conv1 and after conv2
    assert [s.name for s in report.sites if s.kind == "module"] == [
        "encoder.layers.0.activation_fn", "decoder.layers.0.activation_fn"
    ]  # fmt: skip
    # every swap reaches its site (tanh may round to the same float32 values on small inputs)
    assert all(s.changes["sigmoid"].max > 0 for s in report.sites)


def test_cli_on_a_config_json_and_on_the_checkpoint_folder(hf, tmp_path, capsys):
    config = bert_config(hf)
    config.save_pretrained(tmp_path / "random")
    out = tmp_path / "report.json"
    status = main(["audit", str(tmp_path / "random" / "config.json"), "--trained-with", "gelu_new",
                   "--json", str(out)])  # fmt: skip
    text = capsys.readouterr().out
    assert status == 0, text
    assert "weights: RANDOM (seed 0): give a checkpoint folder" in text
    assert "inputs: input_ids (2, 16) (random, seed 0)" in text
    assert "…yer.0.intermediate.intermediate_act_fn exact" in text  # the name's end kept
    assert max(len(line) for line in text.splitlines() if str(tmp_path) not in line) <= 100
    data = json.loads(out.read_text())
    assert data["counts"] == {"exact": 2} and data["trained_with"] == "tanh"
    assert data["mismatch"]["max"] > 0 and len(data["differing"]) == 2

    model = bert(hf)
    model.save_pretrained(tmp_path / "checkpoint")
    assert main(["audit", str(tmp_path / "checkpoint"), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"BertModel from {tmp_path / 'checkpoint'}\nweights: the folder's\n" in text
    ids = torch.randint(0, 40, (2, 16), generator=torch.Generator().manual_seed(0))
    expected = gelus.audit(model, input_ids=ids)  # the same weights and inputs in-process
    assert json.loads(out.read_text())["whole_model"]["tanh"]["max"] == pytest.approx(
        expected.whole["tanh"].max, rel=1e-6
    )


def test_cli_on_a_factory(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_models.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(approximate='tanh'), nn.Linear(8, 2))\n"
        "    return model, (torch.randn(16, 4),)\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "my_models:build", "--trained-with", "tanh"]) == 0
    text = capsys.readouterr().out
    assert "gelus audit: Sequential from my_models:build" in text
    assert "trained with tanh: every GELU site computes tanh, as in training" in text
    missing = tmp_path / "no" / "report.json"
    assert main(["audit", "my_models:build", "--json", str(missing)]) == 2
    err = capsys.readouterr().err
    assert (
        err == f"gelus audit: error: cannot write {missing} (No such file or directory); "
        "give --json a file in a folder you can write to\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit", "no/such/config.json"], "no/such/config.json: no such file or folder; give"),
        (
            ["audit", "no_such_module_x:build"],
            "cannot import no_such_module_x (ModuleNotFoundError",
        ),
        (["audit", "json:dumps"], "json:dumps() raised TypeError"),
        (["audit", "json:nothing_here"], "json has no function nothing_here; give"),
        (["audit", ".", "--trained-with", "cubic"], "--trained-with 'cubic' is not a GELU form"),
        (["audit", "."], ". holds no config.json; give a transformers config.json"),
    ],
)
def test_a_bad_target_is_one_line_and_status_2(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gelus audit: error: ") and message in lines[0]


def test_a_forward_that_fails_on_the_inputs_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "bad_models.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "def build():\n    return nn.Sequential(nn.Linear(4, 8), nn.GELU()), (torch.randn(2, 5),)\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "bad_models:build"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the model's forward fails on the example inputs (" in err


class MyGELU(nn.Module):
    """A model's own GELU: a class whose formula the audit does not know."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.6 * x)


def test_an_unknown_class_is_listed_and_a_routed_model_says_why_no_call_is_seen():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 8), MyGELU(), nn.Linear(8, 2))
    report = gelus.audit(model, torch.randn(8, 4))
    assert [(s.name, s.form, s.changes) for s in report.sites] == [("1", "unknown", {})]
    assert report.whole == {} and "not a GELU form: not swapped" in str(report)

    net = Net()
    gelus.patch(net, functional=True)  # net.act becomes gelus's; the calls go to gelus first
    report = gelus.audit(net, torch.randn(8, 4))
    assert [(s.kind, s.what) for s in report.sites] == [("module", "gelus:GELU")]
    assert "audit before patching" in report.notes[0] and "note: gelus.patch" in str(report)
