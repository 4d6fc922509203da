"""Create a tiny ``transformers`` causal LM offline (random weights, a byte-level BPE tokenizer
trained locally with ``tokenizers``; nothing is downloaded).

    python tests/tiny_lm.py OUT_DIR [--arch llama|gpt2]
"""
from __future__ import annotations

import sys
from pathlib import Path

CORPUS = """Question: Which of these is a source of heat energy? Answer: the sun
Question: What is the boiling point of water at sea level? Answer: 100 degrees Celsius
The following are multiple choice questions (with answers) about high school physics.
A. 1 B. 2 C. 3 D. 4 Answer: A
Q: What is human life expectancy in the United States? A: Human life expectancy is 78 years.
Sarah was a much better surgeon than Maria so Sarah always got the harder cases.
The trophy doesn't fit into the brown suitcase because the trophy is too large.
Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.
How many clips did Natalia sell altogether in April and May? Natalia sold 48/2 = <<48/2=24>>24
clips in May. Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May. #### 72
Removing ice from car: Then, the man writes over the snow covering the window of a car, and a
woman wearing winter clothes smiles. then, the man continues removing the snow on his car.
A man is sitting on a roof. he starts pulling up roofing on a roof. [title] Wear gloves.
The answer is 15 apples and 150 oranges; 1500 people came, 12 dogs, 123 cats.
"""


def train_tokenizer(texts, vocab_size: int = 1000):
    """A byte-level BPE tokenizer (GPT-2 style pre-tokenization, offsets not trimmed)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(list(texts), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                   bos_token="<|endoftext|>", unk_token="<|endoftext|>")


def make_tiny_lm(out_dir, arch: str = "llama", texts=(), max_positions: int = 4096,
                 seed: int = 0) -> Path:
    """Write a tiny random causal LM and its tokenizer to ``out_dir``; returns the path."""
    import torch
    import transformers

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer([CORPUS, *texts])
    vocab = len(tokenizer)
    eos = tokenizer.eos_token_id
    if arch == "llama":
        cfg = transformers.LlamaConfig(
            vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
            bos_token_id=eos, eos_token_id=eos, tie_word_embeddings=False,
            initializer_range=0.5)
        cls = transformers.LlamaForCausalLM
    elif arch == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=vocab, n_embd=64, n_layer=2, n_head=4,
                                      n_positions=max_positions, bos_token_id=eos,
                                      eos_token_id=eos, initializer_range=0.5)
        cls = transformers.GPT2LMHeadModel
    else:
        raise ValueError(f"arch {arch!r}: use llama or gpt2")
    torch.manual_seed(seed)
    model = cls(cfg)  # initializer_range 0.5: peaked predictions, so choices differ clearly
    model.generation_config.pad_token_id = eos
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


if __name__ == "__main__":  # pragma: no cover
    arch = sys.argv[sys.argv.index("--arch") + 1] if "--arch" in sys.argv else "llama"
    print(make_tiny_lm(sys.argv[1], arch=arch))
