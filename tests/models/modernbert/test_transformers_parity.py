"""A ModernBertForMaskedLM written by transformers loads through
`Backbone.from_preset(DIR)` and equals transformers' hidden states and
masked-LM logits (lengths 64, 128, 300 across the 64-token window, padding
in the batch, real tokens compared)."""

import numpy as np
import pytest

from kerasbert.loading.masked_lm import load_masked_lm_from_handle
from kerasbert.models import Backbone
from kerasbert.models import ModernBertBackbone
from modernbert_folders import LENGTHS
from modernbert_folders import padded_batch
from modernbert_folders import sequence_output
from modernbert_folders import transformers_folder

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return transformers_folder(tmp_path_factory.mktemp("modernbert") / "mlm")


def test_hidden_states_equal_transformers(folder):
    path, model = folder
    backbone = Backbone.from_preset(str(path))
    assert isinstance(backbone, ModernBertBackbone)
    assert backbone.count_params() == sum(
        p.numel() for n, p in model.model.named_parameters())
    for length in LENGTHS:
        ids, mask = padded_batch(length)
        with torch.no_grad():
            expected = model.model(input_ids=torch.tensor(ids).long(),
                                   attention_mask=torch.tensor(mask)).last_hidden_state.numpy()
        got = sequence_output(backbone, ids, mask)
        difference = np.abs((got - expected) * mask[..., None]).max()
        print(f"length {length}: max |ours - transformers| = {difference:.2e}")
        assert difference < 1e-5


def test_fill_mask_logits_equal_transformers(folder):
    path, model = folder
    pretrainer = load_masked_lm_from_handle(str(path))
    head = pretrainer.masked_lm_head
    assert not head.dense.use_bias and not head.layer_norm.center
    ids, mask = padded_batch(128)
    positions = np.array([[0, 70, 127], [1, 30, 63], [5, 64, 120]], "int32")
    with torch.no_grad():
        expected = model(input_ids=torch.tensor(ids).long(),
                         attention_mask=torch.tensor(mask)).logits.numpy()
    sequence = pretrainer.backbone({"input_word_ids": ids, "input_mask": mask,
                                    "input_type_ids": np.zeros_like(ids)})["sequence_output"]
    got = np.asarray(head.logits(head.hidden(sequence, positions)))
    difference = np.abs(got - np.take_along_axis(expected, positions[..., None], 1)).max()
    print(f"masked-LM logits: max |ours - transformers| = {difference:.2e}")
    assert difference < 1e-5
