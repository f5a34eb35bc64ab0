"""Property tests (hypothesis): rules that must hold for every input, not only the ones a test author thought of.

- `SamplingParams` accepts exactly the values its rules state and rejects everything else with a ValueError
  naming the field, whatever the types;
- the incremental detokenizer, fed any token ids in any chunks, never raises and streams exactly the text a
  one-shot decode gives (so it never splits a character);
- a stop string never reaches streamed text, whatever the token and client chunking;
- the block manager (every pool kind, with and without prefix caching), driven by random admit / decode / fork /
  preempt / finish sequences, keeps free + cached + used equal to the total and never gives one block to two
  owners without counting both."""
import math

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mini_infer.engine.kv_cache import KVCacheManager
from mini_infer.engine.prefix_cache import make_kv_cache
from mini_infer.engine.sampling import SamplingParams
from mini_infer.engine.sequence import Sequence, append_token, stream_delta
from mini_infer.engine.tokenizer import IncrementalDetokenizer, Tokenizer
from mini_infer.layers.attention import KVStreamSpec
from mini_infer.weights import bundled_model_path

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---------------------------------------------------------------------------------------------- SamplingParams
ANY = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                st.text(max_size=3), st.lists(st.one_of(st.text(max_size=3), st.integers(-3, 3)), max_size=3))
FIELDS = ["n", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
          "repetition_penalty", "max_tokens", "min_tokens", "stop", "stop_token_ids", "ignore_eos", "seed",
          "logprobs", "prompt_logprobs"]
NICE = {"n": st.integers(0, 4), "temperature": st.floats(-1, 3), "top_p": st.floats(-0.5, 1.5),
        "top_k": st.integers(-3, 50), "min_p": st.floats(-0.5, 1.5), "max_tokens": st.integers(-1, 64),
        "min_tokens": st.integers(-1, 64), "seed": st.integers(-2**64, 2**64),
        "repetition_penalty": st.floats(-1, 3), "presence_penalty": st.floats(-3, 3)}


def is_int(x): return isinstance(x, int) and not isinstance(x, bool)
def is_real(x): return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@SETTINGS
@given(st.dictionaries(st.sampled_from(FIELDS), ANY, max_size=4) | st.fixed_dictionaries(
    {}, optional={k: v for k, v in NICE.items()}))
def test_sampling_params_accept_exactly_the_stated_ranges(kwargs):
    try:
        p = SamplingParams(**kwargs)
    except ValueError as e:
        assert str(e).startswith("SamplingParams.") and any(f"SamplingParams.{k} " in str(e) for k in FIELDS)
        return
    assert is_int(p.n) and p.n >= 1 and is_real(p.temperature) and p.temperature >= 0
    assert is_real(p.top_p) and 0 < p.top_p <= 1 and is_int(p.top_k) and p.top_k >= -1
    assert is_real(p.min_p) and 0 <= p.min_p <= 1 and is_real(p.repetition_penalty) and p.repetition_penalty > 0
    assert is_int(p.max_tokens) and 1 <= p.max_tokens and is_int(p.min_tokens) and 0 <= p.min_tokens <= p.max_tokens
    assert p.seed is None or -2**63 <= p.seed < 2**63
    assert all(isinstance(s, str) and s for s in p.stop) and all(t >= 0 for t in p.stop_token_ids)
    assert p.n == 1 or not p.is_greedy
    p.verify()                                                 # a valid object stays valid


# ---------------------------------------------------------------------------------------------- detokenizer
TOK = Tokenizer.from_gguf(bundled_model_path())
# Ids whose text alone is an incomplete UTF-8 character (byte-level fragments): the ones that can split one.
FRAGMENTS = [i for i in range(TOK.vocab_size) if "\ufffd" in TOK.decode([i])]
IDS = st.lists(st.one_of(st.integers(0, TOK.vocab_size - 1), st.sampled_from(FRAGMENTS)), max_size=40)


def chunked(ids: list[int], cuts: list[int]) -> list[list[int]]:
    bounds = sorted({min(c, len(ids)) for c in cuts} | {0, len(ids)})
    return [ids[a:b] for a, b in zip(bounds, bounds[1:])]


@SETTINGS
@given(IDS, IDS, st.lists(st.integers(0, 40), max_size=8), st.booleans())
def test_detokenizer_streams_what_one_decode_gives(prompt, ids, cuts, skip):
    d = IncrementalDetokenizer(TOK, prompt, skip_special_tokens=skip)
    streamed = "".join(d.add(c) for c in chunked(ids, cuts)) + d.flush()
    assert d.output_token_ids == ids
    whole = TOK.decode(prompt + ids, skip_special_tokens=skip)
    head = TOK.decode(prompt, skip_special_tokens=skip)
    assume("\ufffd" not in head and whole.startswith(head))     # the prompt ends on a character boundary
    assert streamed == whole[len(head):]


@SETTINGS
@given(IDS, st.lists(st.integers(0, 40), max_size=8), st.booleans())
def test_detokenizer_alone_equals_decode(ids, cuts, skip):
    d = IncrementalDetokenizer(TOK, [], skip_special_tokens=skip)
    deltas = [d.add(c) for c in chunked(ids, cuts)]
    assert "".join(deltas) + d.flush() == TOK.decode(ids, skip_special_tokens=skip)
    assert all("\ufffd" not in x or "\ufffd" in TOK.decode(ids, skip_special_tokens=skip) for x in deltas)


# ---------------------------------------------------------------------------------------------- stop strings
@SETTINGS
@given(st.data())
def test_stop_strings_never_reach_streamed_text(data):
    ids = data.draw(IDS.filter(bool), label="ids")
    full = TOK.decode(ids)
    stops = data.draw(st.lists(st.one_of(
        st.tuples(st.integers(0, max(0, len(full) - 1)), st.integers(1, 4)).map(lambda t: full[t[0]:t[0] + t[1]]),
        st.text(min_size=1, max_size=3)).filter(bool), min_size=1, max_size=3), label="stops")
    streams_every = data.draw(st.lists(st.booleans(), min_size=len(ids), max_size=len(ids)), label="when")
    seq = Sequence(0, 0, [], SamplingParams(max_tokens=len(ids), ignore_eos=True, stop=stops), TOK, None)
    streamed = ""
    for token, show in zip(ids, streams_every):
        append_token(seq, token, None, set(), 10**6)
        if show or seq.is_finished:
            streamed += stream_delta(seq)
            assert not any(s in streamed for s in stops), (streamed, stops)
        if seq.is_finished:
            break
    assert streamed == seq.text and full.startswith(seq.text)
    assert not any(s in seq.text for s in stops)
    if seq.text != full:                       # cut: a stop string follows what was shown
        assert seq.finish_reason == "stop" and any(full[len(seq.text):].startswith(s) for s in stops)


# ---------------------------------------------------------------------------------------------- block manager
class BlockManagerMachine(RuleBasedStateMachine):
    "Random scheduler-like use of one KV cache; the accounting is checked after every step."

    def __init__(self):
        super().__init__()
        self.kv, self.running, self.waiting, self.next_id = None, {}, [], 0

    @precondition(lambda self: self.kv is None)
    @rule(kinds=st.sampled_from([("full",), ("sliding",), ("full", "sliding")]), caching=st.booleans(),
          num_blocks=st.integers(4, 24), block_size=st.sampled_from([1, 2, 4]))
    def make(self, kinds, caching, num_blocks, block_size):
        specs = {"full": KVStreamSpec((1,)), "sliding": KVStreamSpec((1,), kind="sliding", window=5)}
        groups = {specs[k].group: specs[k] for k in kinds}
        self.kv = make_kv_cache(groups, {g: num_blocks for g in groups}, block_size, caching)
        self.pools = self.kv.pools if isinstance(self.kv, KVCacheManager) else [self.kv]

    def admit(self, seq: Sequence, chunk: int) -> None:
        "Prefix hits, then the rest of the sequence in chunks; back to waiting (nothing held) if short."
        seq.num_computed_tokens = self.kv.get_computed_blocks(seq)
        while seq.num_computed_tokens < len(seq):
            n = min(chunk, len(seq) - seq.num_computed_tokens)
            if not self.kv.allocate_slots(seq, n):
                self.kv.free(seq)
                self.waiting.append(seq)
                return
            seq.num_computed_tokens += n
            self.kv.cache_full_blocks(seq)
        self.running[seq.seq_id] = seq

    @precondition(lambda self: self.kv is not None)
    @rule(prompt=st.lists(st.integers(0, 2), min_size=1, max_size=30), chunk=st.integers(1, 8))
    def add(self, prompt, chunk):
        self.next_id += 1
        self.admit(Sequence(self.next_id, 0, prompt, SamplingParams(), None, None), chunk)

    @precondition(lambda self: self.running)
    @rule(data=st.data(), chunk=st.integers(1, 8))
    def fork(self, data, chunk):                 # a second sample of a running prompt: shares its cached blocks
        parent = self.running[data.draw(st.sampled_from(sorted(self.running)))]
        self.next_id += 1
        self.admit(Sequence(self.next_id, 1, parent.token_ids, SamplingParams(), None, None), chunk)

    @precondition(lambda self: self.running)
    @rule(data=st.data(), token=st.integers(0, 2))
    def decode(self, data, token):
        seq = self.running[data.draw(st.sampled_from(sorted(self.running)))]
        seq.token_ids.append(token)
        if self.kv.allocate_slots(seq, 1):
            seq.num_computed_tokens += 1
            self.kv.cache_full_blocks(seq)
        else:                                    # no room: preempt it (recompute later)
            self.preempt_seq(seq)

    def preempt_seq(self, seq: Sequence) -> None:
        self.kv.free(seq)
        del self.running[seq.seq_id]
        self.waiting.append(seq)

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def preempt(self, data):
        self.preempt_seq(self.running[data.draw(st.sampled_from(sorted(self.running)))])

    @precondition(lambda self: self.waiting)
    @rule(chunk=st.integers(1, 8))
    def readmit(self, chunk):
        self.admit(self.waiting.pop(0), chunk)

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def finish(self, data):
        seq = self.running.pop(data.draw(st.sampled_from(sorted(self.running))))
        self.kv.free(seq)

    @invariant()
    def accounting(self):
        if self.kv is None:
            return
        for pool in self.pools:
            owners: dict[int, int] = {}
            for seq in self.running.values():
                table = [b for b in seq.block_tables.get(pool.group, []) if b != pool.null_block]
                assert len(table) == len(set(table)), f"a block twice in one table: {table}"
                for b in table:
                    owners[b] = owners.get(b, 0) + 1
            for seq in self.waiting:
                assert not seq.block_tables.get(pool.group), "a waiting sequence holds blocks"
            free = list(pool.free_block_ids)
            cached = list(getattr(pool, "evictable", {}))
            assert len(free) == len(set(free)) and not set(free) & set(cached)
            for block in pool.blocks:
                assert block.ref_count == owners.get(block.block_id, 0), (block, owners.get(block.block_id))
                unused = block.block_id in free or block.block_id in cached
                assert unused == (block.ref_count == 0), block
            assert len(free) + len(cached) + len(owners) == pool.num_blocks
            for key, b in getattr(pool, "cached_block_ids", {}).items():
                assert pool.blocks[b].block_hash == key

    def teardown(self):                          # everything given back: every block free or cached
        if self.kv is not None:
            for seq in list(self.running.values()):
                self.kv.free(seq)
            assert all(p.num_unused_blocks() == p.num_blocks for p in self.pools)


BlockManagerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                                 derandomize=True)
test_block_manager_accounting = BlockManagerMachine.TestCase
