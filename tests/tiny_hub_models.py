"""Tiny Hugging Face models built on the spot, so the hub metrics (`lettuce`, `nli`) run for real with no
download: a WordPiece tokenizer built with the `tokenizers` library, a 2-layer ModernBERT token classifier
whose head flags chosen words, and 2-layer BERT sequence classifiers with 3 and 2 labels. Each is saved with
save_pretrained into a folder and loaded by path, exactly as a user's downloaded model would be.

The token classifier knows no meaning: its head reads one embedding dimension that is +5 for the FLAGGED
words and -5 for every other token, so those words come out at P(hallucinated) ~0.97 and everything else
at ~0.02, whatever the context; the 2 random (seeded) layers add a little context dependence, enough that
chunks of one context give slightly different probabilities. The entailment classifiers are random
(seeded): the tests compare the metric with a forward pass run by hand, not with any truth.
"""

from __future__ import annotations

from pathlib import Path

#: answer words the token classifier flags as hallucinated
FLAGGED = ("purple", "1999", "mars", "dragons")
_CORPUS = [
    "the capital of france is paris and the river seine runs through it",
    "the eiffel tower was built in 1889 for the world fair in paris",
    "passage question answer context according to the passages below briefly",
    "the moon is made of rock and the sky is blue during the day",
    "purple dragons flew to mars in 1999 according to nobody at all.",
    "berlin, the capital; of: germany? yes! it is (big) - really",
    "given the following question and passages output the answer bear in mind",
    "water boils at 100 degrees celsius at sea level on earth",
    "берлин столица германии и самый большой город страны",
    "巴黎 是 法国 的 首都",
]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_tokenizer(folder: Path) -> None:
    """A WordPiece tokenizer (lower-cased, BERT pre-tokenization, [CLS] A [SEP] B [SEP] pairs), saved as
    a transformers fast tokenizer. Its vocabulary is every word of the corpus and every character (alone
    and as a ``##`` continuation), in sorted order, not learned by WordPieceTrainer: the trainer breaks
    ties in a different order on every run, and a vocabulary that moves moves every test's numbers."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words = sorted({word for text in _CORPUS for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))})
    characters = sorted({character for word in words for character in word})
    pieces = [*SPECIAL, *characters, *(f"##{c}" for c in characters), *(w for w in words if w not in characters)]
    tokenizer = Tokenizer(models.WordPiece({piece: i for i, piece in enumerate(pieces)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.WordPiece()
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=512)
    fast.save_pretrained(folder)


def _ids(folder: Path) -> dict[str, int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    return {name: tokenizer.convert_tokens_to_ids(name) for name in SPECIAL} | {"vocab": len(tokenizer)}


def build_token_classifier(folder: Path) -> Path:
    """The LettuceDetect stand-in: ModernBERT, 2 layers, hidden 32, labels 0 supported / 1 hallucinated."""
    import torch
    from transformers import AutoTokenizer, ModernBertConfig, ModernBertForTokenClassification

    train_tokenizer(folder)
    ids = _ids(folder)
    config = ModernBertConfig(
        vocab_size=ids["vocab"], hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=1024, local_attention=64, pad_token_id=ids["[PAD]"], cls_token_id=ids["[CLS]"],
        sep_token_id=ids["[SEP]"], bos_token_id=ids["[CLS]"], eos_token_id=ids["[SEP]"],
        id2label={0: "supported", 1: "hallucinated"}, label2id={"supported": 0, "hallucinated": 1})
    torch.manual_seed(0)
    model = ModernBertForTokenClassification(config).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    flagged = {tokenizer.convert_tokens_to_ids(word) for word in FLAGGED}
    assert tokenizer.unk_token_id not in flagged, "every flagged word is one token of the vocabulary"
    with torch.no_grad():
        embeddings = model.model.embeddings.tok_embeddings.weight
        embeddings[:, 0] = -5.0
        embeddings[sorted(flagged), 0] = 5.0
        # head: dense maps dimension 0 to [x, -x, 0, ...]; after GELU and the norm, dimension 0 is high for a
        # flagged token and dimension 1 for any other; the classifier reads their difference
        dense = model.head.dense.weight
        dense.zero_()
        dense[0, 0], dense[1, 0] = 1.0, -1.0
        classifier = model.classifier.weight
        classifier.zero_()
        classifier[1, 0], classifier[1, 1] = 0.35, -0.35
        classifier[0, 0], classifier[0, 1] = -0.35, 0.35
    model.save_pretrained(folder)
    return folder


def build_entailment_classifier(folder: Path, labels: dict[int, str], seed: int = 1) -> Path:
    """A 2-layer BERT sequence classifier with ``labels`` as its config.id2label, random (seeded) weights."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    train_tokenizer(folder)
    ids = _ids(folder)
    config = BertConfig(vocab_size=ids["vocab"], hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=2, max_position_embeddings=512, pad_token_id=ids["[PAD]"],
                        initializer_range=0.5,  # large random weights: the [CLS] output depends on the words
                        id2label=labels, label2id={name: i for i, name in labels.items()})
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    return folder


REMOTE_CODE = '''
import torch
from transformers import PretrainedConfig, PreTrainedModel


class TinyConsistencyConfig(PretrainedConfig):
    model_type = "tiny-consistency"


class TinyConsistency(PreTrainedModel):
    """HHEM-2.1-open's shape: code of its own, no tokenizer files, predict(pairs) -> P(consistent). Here
    P(consistent) is the share of the hypothesis's words that the premise has, so tests compute it by hand."""

    config_class = TinyConsistencyConfig

    def __init__(self, config):
        super().__init__(config)
        self.unused = torch.nn.Parameter(torch.zeros(1))
        self.post_init()

    def forward(self, **kwargs):
        raise NotImplementedError("ask predict()")

    def predict(self, pairs):
        def words(text):
            return set(text.lower().replace(".", " ").split())
        return torch.tensor([len(words(h) & words(p)) / max(1, len(words(h))) for p, h in pairs])
'''


def build_remote_code_consistency(folder: Path) -> Path:
    """A model that loads only with trust_remote_code (its config.json has an auto_map), like HHEM-2.1-open."""
    import importlib.util
    import json
    import sys

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "modeling_tiny.py").write_text(REMOTE_CODE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("modeling_tiny", folder / "modeling_tiny.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["modeling_tiny"] = module
    spec.loader.exec_module(module)
    module.TinyConsistency(module.TinyConsistencyConfig()).save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "modeling_tiny.TinyConsistencyConfig",
                          "AutoModelForSequenceClassification": "modeling_tiny.TinyConsistency"}
    (folder / "config.json").write_text(json.dumps(config))
    del sys.modules["modeling_tiny"]
    return folder
