#!/usr/bin/env python3
"""Produces the tokenizer parity fixtures (tests/fixtures/tokenizer/) with Hugging Face `tokenizers`.

Two steps, the first without `tokenizers` (runs anywhere), the second on a machine that has it
(the GPU machine: Python 3.12, tokenizers, transformers, no network):

  1. python3 tools/make_tokenizer_fixtures.py --write-corpus tests/fixtures/tokenizer
       writes corpus.json (a generated multilingual corpus) and train_config.json.
     Then our trainer's output is written by the parity test:
       NEMOTRON_TOKENIZER_FIXTURE_OUT=tests/fixtures/tokenizer/ours_tokenizer.json \
         build/tests/test_data --gtest_filter='TokenizerParity.our_trained_tokenizer*'
  2. python3 tools/make_tokenizer_fixtures.py --fixtures DIR --out OUT [--big-out BIG --big-stress N]
       trains a BPE tokenizer with HF on DIR/corpus.json (Llama-3 Split regex + ByteLevel without
       regex, ignore_merges, special and added tokens) -> OUT/hf_tokenizer.json, and writes
       OUT/expected.json: HF's ids / decodes of tricky and random strings under that tokenizer
       and under DIR/ours_tokenizer.json (saved by our Tokenizer::save), plus per-document id
       hashes of the corpus; OUT/pretok.json: the pieces several HF pre-tokenizers (Llama-3,
       o200k-style and NeMo-style regexes, GPT-2 ByteLevel, every Split behaviour) cut strings into. --big-out writes a copy of everything with N random strings, for a
       one-off larger check that is not committed.
"""
import argparse
import json
import os
import random
import shutil
import sys

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
TRAIN_CONFIG = {
    "vocab_size": 1500,
    "min_frequency": 2,
    "special_tokens": ["<s>", "</s>", "<|im_start|>", "<|im_end|>"],
    "pattern": LLAMA3_PATTERN,
    "ignore_merges": True,
    "bos_token": "<s>",
}

# ---- corpus -----------------------------------------------------------------------------------

WORDS = {
    "en": ("the of and to in is that for it with as was on be by this are at from or an have not "
           "model token data train loss step batch layer attention expert mixture state space "
           "sequence language learning gradient optimizer checkpoint tokenizer vocabulary merge "
           "pretraining reinforcement evaluation reward policy value function network weight "
           "quick brown fox jumps over lazy dog people time year way day thing world life hand").split(),
    "de": "der die das und ist nicht mit auf für Straße Größe über Mädchen schön Grüße Köln Maß".split(),
    "fr": "le la les et est une des pour avec café élève où très déjà garçon français naïve".split(),
    "es": "el los las y es una para con año niño mañana canción España corazón".split(),
    "ru": "и в не на что это как по но модель данные обучение слово текст язык".split(),
    "el": "και το να είναι για με της που δεδομένα μοντέλο γλώσσα".split(),
    "ja": "これは 日本語 の テキスト です 学習 データ モデル 言語 東京".split(),
    "zh": "这是 中文 文本 模型 数据 训练 语言 学习 北京 你好".split(),
    "ko": "이것은 한국어 텍스트 입니다 모델 데이터 학습".split(),
    "ar": "هذا نص عربي نموذج بيانات تدريب لغة".split(),
    "hi": "यह हिन्दी पाठ है मॉडल डेटा भाषा".split(),
    "vi": "đây là văn bản tiếng Việt có dấu mô hình dữ liệu".split(),
}
EMOJI = ["😀", "👍", "👍🏽", "🎉", "❤️", "🔥", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "🏳️‍🌈", "✅", "🚀"]
CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }\n",
    "if (a && b) {\n\treturn -1;\n}\n",
    "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\n",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;\n",
    "<div class=\"main\">Hello&nbsp;world</div>\n",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}\n",
]


def make_corpus(seed=1234, docs=700):
    rng = random.Random(seed)
    langs = list(WORDS)
    out = []
    for d in range(docs):
        lang = rng.choice(langs) if rng.random() < 0.5 else "en"
        parts = []
        for _ in range(rng.randint(3, 12)):  # sentences
            words = [rng.choice(WORDS[lang]) for _ in range(rng.randint(3, 14))]
            if rng.random() < 0.3:
                words.insert(rng.randrange(len(words) + 1), str(rng.randint(0, 10 ** rng.randint(1, 7))))
            if rng.random() < 0.15:
                words.insert(rng.randrange(len(words) + 1), rng.choice(EMOJI))
            if lang == "en" and rng.random() < 0.3:
                i = rng.randrange(len(words))
                words[i] += rng.choice(["'s", "'re", "'ll", "'ve", "'d", "n't", "'S", "'LL"])
            s = " ".join(words)
            s = s[0].upper() + s[1:] if s[0].isalpha() else s
            parts.append(s + rng.choice([".", ".", "!", "?", ",", ":", ";", "..."]))
        text = rng.choice([" ", "  ", "\n", "\n\n", "\r\n", "\t"]).join(parts)
        if rng.random() < 0.15:
            text += "\n" + rng.choice(CODE)
        if rng.random() < 0.05:
            text = rng.choice(["<s>", "<|im_start|>user\n"]) + text + rng.choice(["</s>", "<|im_end|>\n"])
        out.append(text)
    return out


# ---- strings to check -------------------------------------------------------------------------

TRICKY = [
    "", " ", "  ", "      ", "\n", "\n\n\n", "\t", "\r\n", "Hello, world!", " leading space",
    "  two leading spaces", "trailing space ", "trailing spaces   ", "\ttab\tseparated\tvalues\t",
    "line1\nline2\n\nline4\n", "windows\r\nline\r\nend\r\n", "mixed \t \n \r\n  runs   of\twhitespace",
    "x\n \ny", "a  \n  b", "1234567890", "12345678901234567890", "3.14159 2,718 1e10 0x1F -42",
    "٣٤٥ ١٢٣٤ arabic-indic", "½ Ⅻ ² ³", "it's they're we've I'm you'll he'd can't",
    "IT'S THEY'RE WE'LL I'D", "O'Neil's", "'s alone", "it'ſ", "don't stop", "rock'n'roll",
    "Grüße aus Köln", "Ελληνικά κείμενα", "Русский текст", "日本語のテキストです。", "中文文本，标点符号！",
    "한국어 텍스트", "العربية نص", "עברית", "हिन्दी पाठ", "ไทย ภาษา", "Tiếng Việt có dấu",
    "e\u0301 vs \u00e9", "a\u0308\u0304", "Z\u0324\u0354\u0367\u0311\u0313a\u0308\u0356\u032d\u0308\u0307",
    "👍🏽", "👨‍👩‍👧‍👦 family", "🇫🇷🇯🇵 flags", "🏳️‍🌈", "❤️‍🔥", "keycap 1️⃣", "😀😃😄",
    "<s>Hello</s>", "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "text<s>inside</s>text", "<s><s></s>", "< s >", "<|im_start|", "<think>\nreason\n</think>answer",
    "a <mask> b", "a<mask>b", "a  \t<mask>", "Nemotron rocks", "NemotronX", "(Nemotron)", "xNemotron",
    "\u00a0nbsp\u00a0", "\u3000ideographic\u3000space", "\u180e mongolian \u180e", "\u2028line sep\u2029para",
    "zero\u200bwidth\u200djoiner", "\u0085next line", "\x0b\x0cvt ff", "\x1c\x1d\x1e\x1f separators",
    "\ufeffBOM at start", "nul\x00byte", "def f(x):\n    return x**2  # comment\n",
    "if (a && b) { return -1; }", "http://example.com/path?q=1&r=2#frag", "snake_case camelCase PascalCase kebab-case",
    "a" * 300, "ab" * 150, "1" * 50, " " * 40 + "x", "!!!???...", "Mr. O'Brien's 2nd-place finish—wow!",
    "the the the the", "model models modeling", "ÿþý", "\u0100\u0101\u0120", "Ġ Ċ ĉ",
    # where regex engines and Unicode tables could disagree
    "a\u180e\u180eb", "x\u180e\u180e y", "a\u3000<mask>", "a\u180e<mask>", "Nemotron\u0301", "_Nemotron",
    "Nemotron_", "Nemotron\u0661", "\u0661Nemotron", "\u01c5Nemotron", "Nemotron\u200d", "\u200dNemotron",
    "Nemotron\u00a0", "'S's'Ss", "\u01c5\u01c5\u01c5 \u01c4\u01c6", "\u03a3\u0391\u03a3 \u03c3\u03b1\u03c2",
    "\u0130stanbul \u0131i", "\ufb01nance \ufb00", "\u00df \u1e9e", "\U0001d400\U0001d401 \U0001d7cf\U0001d7d0",
    "\u2160 \u2161 \u2170", "\u0660\u0661\u0662\u0663\u0664\u0665", "\U0001f3fb alone", "a\u0300\u0301\u0302b",
    "\u0300leading combining", "x" + "\u0301" * 20, "\u02b0\u3005\u30fc\u00aa", "ABCdef GHi jKL",
    "HTTPServer XMLHttpRequest", "\t\n<mask>", "it'S IT's", "x'\u017f",
]
O200K_STYLE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
NEMO_STYLE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
              r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
              r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

STRESS_FRAGMENTS = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") * 3
    + list(".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`") + [" "] * 20
    + ["\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u180e", "\u2028", "\u0085", "\u200b", "\u200d", "\ufe0f"]
    + list("éèüößñçøåæœÀÉÎÕÜ") + list("αβγδΩЖЯжя") + list("日本語中文한국") + list("ابت") + list("हिन")
    + ["\u0301", "\u0308", "\u0327", "\u0336"] + EMOJI + ["🏽", "🇺", "🇸"]
    + ["<s>", "</s>", "<|im_start|>", "<|im_end|>", "<mask>", "<think>", "</think>", "Nemotron"]
    + ["'s", "'S", "'re", "'LL", "'ve", "n't", "'d", "'m", "'"] + ["12", "345", "6789", "١٢", "½"]
    + [w for ws in WORDS.values() for w in ws[:6]]
)


def stress_strings(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 40)
        s = "".join(rng.choice(STRESS_FRAGMENTS) for _ in range(k))
        if rng.random() < 0.1:
            s = " " * rng.randint(1, 5) + s
        out.append(s)
    return out


def fnv1a_ids(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for b in int(i).to_bytes(4, "little"):
            h ^= b
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


# ---- HF side ------------------------------------------------------------------------------------

def train_hf(corpus, cfg):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(ignore_merges=cfg["ignore_merges"]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(cfg["pattern"]), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=cfg["vocab_size"], min_frequency=cfg["min_frequency"],
                                  special_tokens=cfg["special_tokens"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    bos = cfg["bos_token"]
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B:1",
                                      special_tokens=[(bos, tok.token_to_id(bos))]),
    ])
    # added tokens as Nemotron / RoBERTa-style tokenizers have them
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False),
                    AddedToken("</think>", special=False, normalized=False),
                    AddedToken("Nemotron", single_word=True, special=False, normalized=False)])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    return tok


def pretok_configs():
    """Pre-tokenizers whose splits are compared piece by piece (regex engine and behaviours)."""
    from tokenizers import Regex
    from tokenizers import pre_tokenizers as pt

    return [
        ("llama3", pt.Split(Regex(LLAMA3_PATTERN), behavior="isolated")),
        ("o200k_style", pt.Split(Regex(O200K_STYLE), behavior="isolated")),
        ("nemo_style", pt.Split(Regex(NEMO_STYLE), behavior="isolated")),
        ("gpt2_byte_level", pt.ByteLevel(add_prefix_space=True, use_regex=True)),
        ("llama3_then_byte_level", pt.Sequence([pt.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
                                                pt.ByteLevel(add_prefix_space=False, use_regex=False)])),
        ("punct_merged_with_previous", pt.Split(Regex(r"\p{P}+"), behavior="merged_with_previous")),
        ("punct_merged_with_next", pt.Split(Regex(r"\p{P}+"), behavior="merged_with_next")),
        ("space_contiguous", pt.Split(Regex(r"\s"), behavior="contiguous")),
        ("space_removed_inverted", pt.Split(Regex(r"\s+"), behavior="removed", invert=True)),
        ("literal_removed", pt.Split("--", behavior="removed")),
    ]


def write_pretok(path, texts):
    from tokenizers import Tokenizer, models

    out = []
    for name, p in pretok_configs():
        holder = Tokenizer(models.BPE())
        holder.pre_tokenizer = p
        spec = json.loads(holder.to_str())["pre_tokenizer"]  # HF's own JSON for it
        out.append({"name": name, "pre_tokenizer": spec,
                    "pieces": [[piece for piece, _ in p.pre_tokenize_str(t)] for t in texts]})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"texts": texts, "configs": out}, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def expectations(tok, texts, full):
    out = []
    for s in texts:
        ids = tok.encode(s, add_special_tokens=False).ids
        if not full:
            out.append(ids)
            continue
        out.append({
            "ids": ids,
            "ids_special": tok.encode(s, add_special_tokens=True).ids,
            "decode": tok.decode(ids, skip_special_tokens=False),
            "decode_skip": tok.decode(tok.encode(s, add_special_tokens=True).ids, skip_special_tokens=True),
        })
    return out


def write_expected(path, hf, ours, corpus, tricky, stress, versions, transformers_ok):
    doc = {
        "versions": versions,
        "transformers_agrees_on_ours": transformers_ok,
        "tricky": [{"text": t, "hf": h, "ours": o}
                   for t, h, o in zip(tricky, expectations(hf, tricky, True), expectations(ours, tricky, True))],
        "stress": [{"text": t, "hf": h, "ours": o}
                   for t, h, o in zip(stress, expectations(hf, stress, False), expectations(ours, stress, False))],
        "corpus": {
            "hf": [[len(e.ids), fnv1a_ids(e.ids)] for e in hf.encode_batch(corpus, add_special_tokens=False)],
            "ours": [[len(e.ids), fnv1a_ids(e.ids)] for e in ours.encode_batch(corpus, add_special_tokens=False)],
        },
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def fnv1a_all(encodings):
    h = 0xCBF29CE484222325
    for e in encodings:
        for i in e.ids:
            for b in int(i).to_bytes(4, "little"):
                h ^= b
                h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def bench(tokenizer_path, docs_path):
    """HF throughput on the same tokenizer and documents as bench/tokenizer_throughput."""
    import time
    import tokenizers
    from tokenizers import Tokenizer

    with open(docs_path, encoding="utf-8") as f:
        docs = json.load(f)
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    tok = Tokenizer.from_file(tokenizer_path)
    t0 = time.perf_counter()
    n = sum(len(tok.encode(d, add_special_tokens=False).ids) for d in docs)
    dt = time.perf_counter() - t0
    print(f"HF tokenizers {tokenizers.__version__}: {len(docs)} docs, {nbytes / 1e6:.2f} MB")
    print(f"HF encode, 1 thread (cold cache)  {n / dt:10.0f} tokens/s  {nbytes / dt / 1e6:7.2f} MB/s  ({n} tokens)")
    tok = Tokenizer.from_file(tokenizer_path)
    t0 = time.perf_counter()
    out = tok.encode_batch(docs, add_special_tokens=False)
    dt = time.perf_counter() - t0
    n = sum(len(e.ids) for e in out)
    print(f"HF encode_batch, all threads (cold) {n / dt:10.0f} tokens/s  {nbytes / dt / 1e6:7.2f} MB/s  ({n} tokens)")
    print(f"ids fnv1a: {fnv1a_all(out)}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-corpus", metavar="DIR", help="step 1: write corpus.json and train_config.json")
    ap.add_argument("--fixtures", metavar="DIR", help="step 2: folder with corpus.json, train_config.json, "
                                                      "ours_tokenizer.json")
    ap.add_argument("--out", metavar="DIR", help="step 2: where hf_tokenizer.json and expected.json go")
    ap.add_argument("--stress", type=int, default=300, help="random strings in expected.json")
    ap.add_argument("--big-out", metavar="DIR", help="also write a full fixture folder with --big-stress strings")
    ap.add_argument("--big-stress", type=int, default=20000)
    ap.add_argument("--bench-tokenizer", metavar="JSON", help="time HF on the documents of --bench-docs")
    ap.add_argument("--bench-docs", metavar="JSON", help="a JSON list of documents (tokenizer_throughput --save-docs)")
    args = ap.parse_args()

    if args.write_corpus:
        os.makedirs(args.write_corpus, exist_ok=True)
        with open(os.path.join(args.write_corpus, "corpus.json"), "w", encoding="utf-8") as f:
            json.dump(make_corpus(), f, ensure_ascii=False, indent=0)
            f.write("\n")
        with open(os.path.join(args.write_corpus, "train_config.json"), "w", encoding="utf-8") as f:
            json.dump(TRAIN_CONFIG, f, ensure_ascii=False, indent=2)
            f.write("\n")
        return 0
    if args.bench_tokenizer:
        return bench(args.bench_tokenizer, args.bench_docs)
    if not (args.fixtures and args.out):
        ap.error("give --write-corpus DIR, or --fixtures DIR and --out DIR")

    import tokenizers
    from tokenizers import Tokenizer

    with open(os.path.join(args.fixtures, "corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    with open(os.path.join(args.fixtures, "train_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    ours_path = os.path.join(args.fixtures, "ours_tokenizer.json")
    hf = train_hf(corpus, cfg)
    os.makedirs(args.out, exist_ok=True)
    hf_path = os.path.join(args.out, "hf_tokenizer.json")
    hf.save(hf_path)
    ours = Tokenizer.from_file(ours_path)  # proves HF loads the file our save() wrote
    print(f"tokenizers {tokenizers.__version__}: HF vocab {hf.get_vocab_size()}, ours {ours.get_vocab_size()}")

    hf_model = json.loads(hf.to_str())["model"]
    ours_model = json.loads(ours.to_str())["model"]
    same_vocab = hf_model["vocab"] == ours_model["vocab"]
    same_merges = hf_model["merges"] == ours_model["merges"]
    print(f"our trainer vs HF trainer: vocab identical {same_vocab}, merges identical {same_merges} "
          f"({len(hf_model['merges'])} vs {len(ours_model['merges'])} merges)")
    if not same_merges:
        for i, (a, b) in enumerate(zip(hf_model["merges"], ours_model["merges"])):
            if a != b:
                print(f"  first difference at merge {i}: HF {a} vs ours {b}")
                break

    versions = {"tokenizers": tokenizers.__version__, "python": sys.version.split()[0]}
    transformers_ok = None
    try:
        import transformers
        versions["transformers"] = transformers.__version__
        fast_cls = getattr(transformers, "PreTrainedTokenizerFast", None) or getattr(transformers, "TokenizersBackend")
        fast = fast_cls(tokenizer_file=ours_path)
        transformers_ok = all(fast.encode(t, add_special_tokens=False) == ours.encode(t, add_special_tokens=False).ids
                              for t in TRICKY)
        print(f"transformers {transformers.__version__} PreTrainedTokenizerFast(ours) agrees: {transformers_ok}")
    except Exception as e:  # noqa: BLE001 - report, do not fail the fixtures
        print(f"transformers check skipped: {e!r}")

    write_expected(os.path.join(args.out, "expected.json"), hf, ours, corpus, TRICKY,
                   stress_strings(args.stress, 99), versions, transformers_ok)
    pretok_texts = [t for t in TRICKY if t] + stress_strings(60, 7)
    write_pretok(os.path.join(args.out, "pretok.json"), pretok_texts)
    if args.big_out:
        os.makedirs(args.big_out, exist_ok=True)
        for name in ("corpus.json", "train_config.json", "ours_tokenizer.json"):
            shutil.copy(os.path.join(args.fixtures, name), args.big_out)
        shutil.copy(hf_path, args.big_out)
        write_expected(os.path.join(args.big_out, "expected.json"), hf, ours, corpus, TRICKY,
                       stress_strings(args.big_stress, 12345), versions, transformers_ok)
        write_pretok(os.path.join(args.big_out, "pretok.json"),
                     [t for t in TRICKY if t] + stress_strings(args.big_stress, 54321))
    print("wrote", os.listdir(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
