"""Chapter 10's bank: differently written right answers for RollingKVCache, LatentCache and PagedKVCache, each written apart from
the reference (no one-token edits of it)."""

from tests.bank import Answer

RIGHT = [
    Answer("RollingKVCache", "a buffer kept in position order and shifted with torch.roll", '''
class RollingKVCache:
    def __init__(self, batch_size, num_heads, window, head_dim, dtype=torch.float32):
        self.keys = torch.zeros(batch_size, num_heads, window, head_dim, dtype=dtype)
        self.values = torch.zeros_like(self.keys)
        self.window, self._count = window, 0

    @property
    def seq_len(self):
        return self._count

    def reset(self):
        self._count = 0

    def update(self, k, v):
        t, w = k.shape[2], self.window
        held = min(self._count, w - 1)
        k_vis = torch.cat([self.keys[:, :, w - held:], k], dim=2)
        v_vis = torch.cat([self.values[:, :, w - held:], v], dim=2)
        keep = min(t, w)
        self.keys = torch.roll(self.keys, -keep, dims=2)
        self.values = torch.roll(self.values, -keep, dims=2)
        self.keys[:, :, w - keep:] = k[:, :, t - keep:]
        self.values[:, :, w - keep:] = v[:, :, t - keep:]
        self._count += t
        return k_vis, v_vis
'''),
    Answer("RollingKVCache", "keeps the last window - 1 positions with torch.cat and a slice (cloned)", '''
class RollingKVCache:
    def __init__(self, batch_size, num_heads, window, head_dim, dtype=torch.float32):
        self.window, self.seen = window, 0
        self.k = torch.empty(batch_size, num_heads, 0, head_dim, dtype=dtype)
        self.v = torch.empty(batch_size, num_heads, 0, head_dim, dtype=dtype)

    @property
    def seq_len(self):
        return self.seen

    def reset(self):
        self.k, self.v, self.seen = self.k[:, :, :0], self.v[:, :, :0], 0

    def update(self, k, v):
        k_vis, v_vis = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        keep = min(self.window - 1, k_vis.shape[2])
        self.k = k_vis[:, :, k_vis.shape[2] - keep:].clone()
        self.v = v_vis[:, :, v_vis.shape[2] - keep:].clone()
        self.seen += k.shape[2]
        return k_vis, v_vis
'''),
    Answer("RollingKVCache", "a ring written with index_copy_, read in position order by rolling a copy", '''
class RollingKVCache:
    def __init__(self, batch_size, num_heads, window, head_dim, dtype=torch.float32):
        self.w = window
        self.kbuf = torch.zeros((batch_size, num_heads, window, head_dim), dtype=dtype)
        self.vbuf = torch.zeros((batch_size, num_heads, window, head_dim), dtype=dtype)
        self.total = 0

    @property
    def seq_len(self):
        return self.total

    def reset(self):
        self.total = 0

    def update(self, k, v):
        held = min(self.total, self.w - 1)
        shift = -(self.total % self.w)          # the oldest slot first: slots in position order
        old_k = torch.roll(self.kbuf, shift, dims=2)[:, :, self.w - held:]
        old_v = torch.roll(self.vbuf, shift, dims=2)[:, :, self.w - held:]
        k_vis, v_vis = torch.cat((old_k, k), dim=2), torch.cat((old_v, v), dim=2)
        n_new = k.shape[2]
        last = min(n_new, self.w)
        slots = torch.remainder(torch.arange(self.total + n_new - last, self.total + n_new), self.w)
        self.kbuf.index_copy_(2, slots, k[:, :, n_new - last:])
        self.vbuf.index_copy_(2, slots, v[:, :, n_new - last:])
        self.total += n_new
        return k_vis, v_vis
'''),
    Answer("LatentCache", "narrow() and copy_()", '''
class LatentCache:
    def __init__(self, batch_size, max_seq_len, latent_dim, dtype=torch.float32):
        self.store = torch.empty(batch_size, max_seq_len, latent_dim, dtype=dtype)
        self.used = 0

    @property
    def seq_len(self):
        return int(self.used)

    def update(self, c):
        if self.used + c.size(1) > self.store.size(1):
            raise ValueError(f"{self.used} + {c.size(1)} positions exceed max_seq_len = {self.store.size(1)}")
        self.store.narrow(1, self.used, c.size(1)).copy_(c)
        self.used += c.size(1)
        return self.store.narrow(1, 0, self.used)
'''),
    Answer("LatentCache", "a capacity check by remaining room, index_copy_ into the buffer", '''
class LatentCache:
    def __init__(self, batch_size, max_seq_len, latent_dim, dtype=torch.float32):
        self.capacity = max_seq_len
        self.data = torch.zeros((batch_size, max_seq_len, latent_dim), dtype=dtype)
        self.count = 0

    @property
    def seq_len(self):
        return self.count

    def update(self, c):
        new = c.shape[1]
        room = self.capacity - self.count
        if new > room:
            raise ValueError(f"cannot add {new} latents: only {room} of {self.capacity} positions left")
        self.data.index_copy_(1, torch.arange(self.count, self.count + new), c)
        self.count += new
        return self.data[:, 0:self.count, :]
'''),
    Answer("LatentCache", "positions written one by one in a loop, the view taken with torch.narrow", '''
class LatentCache:
    def __init__(self, batch_size, max_seq_len, latent_dim, dtype=torch.float32):
        self._buffer = torch.empty(batch_size, max_seq_len, latent_dim, dtype=dtype)
        self._len = 0

    @property
    def seq_len(self):
        return self._len

    def update(self, c):
        if self._len + c.shape[1] > self._buffer.shape[1]:
            raise ValueError("LatentCache.update: max_seq_len exceeded")
        for t in range(c.shape[1]):
            self._buffer[:, self._len + t, :] = c[:, t, :]
        self._len += c.shape[1]
        return torch.narrow(self._buffer, 1, 0, self._len)
'''),
    Answer("PagedKVCache", "a Counter of users, a deque free list, position-by-position writes, torch.cat gather", '''
import collections


class PagedKVCache:
    def __init__(self, num_blocks, block_size, num_heads, head_dim, dtype=torch.float32):
        self.pool = torch.zeros(2, num_blocks, num_heads, block_size, head_dim, dtype=dtype)
        self.bs = block_size
        self.free_ids = collections.deque(range(num_blocks))
        self.refs = collections.Counter()
        self.seqs = {}

    @property
    def num_free_blocks(self):
        return len(self.free_ids)

    def block_table(self, seq_id):
        return [int(b) for b in self.seqs[seq_id][0]]

    def append(self, seq_id, k, v):
        blocks, n = self.seqs.get(seq_id, ([], 0))
        blocks = blocks.copy()
        cow = n % self.bs > 0 and self.refs[blocks[-1]] > 1
        grow = math.ceil((n + k.shape[1]) / self.bs) - len(blocks)
        if cow + grow > len(self.free_ids):
            raise RuntimeError(f"need {cow + grow} blocks, only {len(self.free_ids)} free")
        if cow:
            fresh = self.free_ids.popleft()
            self.pool[:, fresh] = self.pool[:, blocks[-1]]
            self.refs[blocks[-1]] -= 1
            self.refs[fresh] += 1
            blocks[-1] = fresh
        for _ in range(grow):
            fresh = self.free_ids.popleft()
            self.refs[fresh] += 1
            blocks.append(fresh)
        for t in range(k.shape[1]):
            pos = n + t
            self.pool[0, blocks[pos // self.bs], :, pos % self.bs] = k[:, t]
            self.pool[1, blocks[pos // self.bs], :, pos % self.bs] = v[:, t]
        self.seqs[seq_id] = (blocks, n + k.shape[1])

    def gather(self, seq_id):
        blocks, n = self.seqs[seq_id]
        if not blocks:
            empty = self.pool[0, 0, :, :0]
            return empty.clone(), empty.clone()
        k = torch.cat([self.pool[0, b] for b in blocks], dim=1)[:, :n]
        v = torch.cat([self.pool[1, b] for b in blocks], dim=1)[:, :n]
        return k, v

    def fork(self, src, dst):
        blocks, n = self.seqs[src]
        self.seqs[dst] = (blocks.copy(), n)
        self.refs.update(blocks)

    def free(self, seq_id):
        blocks, _ = self.seqs.pop(seq_id)
        for b in blocks:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_ids.append(b)
'''),
    Answer("PagedKVCache", "a set of free ids (lowest first), refcounts in a dict, writes block by block in slices", '''
class PagedKVCache:
    def __init__(self, num_blocks, block_size, num_heads, head_dim, dtype=torch.float32):
        self.block_size = block_size
        self.k_pool = torch.zeros(num_blocks, num_heads, block_size, head_dim, dtype=dtype)
        self.v_pool = torch.zeros_like(self.k_pool)
        self.free_set = set(range(num_blocks))
        self.refcount = {}
        self.table = {}
        self.length = {}

    @property
    def num_free_blocks(self):
        return len(self.free_set)

    def block_table(self, seq_id):
        return [b for b in self.table[seq_id]]

    def _take(self):
        b = min(self.free_set)
        self.free_set.remove(b)
        self.refcount[b] = 1
        return b

    def append(self, seq_id, k, v):
        blocks = list(self.table.get(seq_id, ()))
        n, t, bs = self.length.get(seq_id, 0), k.shape[1], self.block_size
        partial = n % bs
        needs_copy = partial > 0 and self.refcount[blocks[-1]] > 1
        needed = (n + t + bs - 1) // bs - len(blocks) + int(needs_copy)
        if needed > len(self.free_set):
            raise RuntimeError(f"PagedKVCache: {needed} blocks needed, {len(self.free_set)} free")
        if needs_copy:
            old, new = blocks[-1], self._take()
            self.k_pool[new, :, :partial] = self.k_pool[old, :, :partial]
            self.v_pool[new, :, :partial] = self.v_pool[old, :, :partial]
            self.refcount[old] -= 1
            blocks[-1] = new
        written = 0
        while written < t:
            pos = n + written
            if pos // bs == len(blocks):
                blocks.append(self._take())
            blk, off = blocks[pos // bs], pos % bs
            step = min(bs - off, t - written)
            self.k_pool[blk, :, off:off + step] = k[:, written:written + step]
            self.v_pool[blk, :, off:off + step] = v[:, written:written + step]
            written += step
        self.table[seq_id], self.length[seq_id] = blocks, n + t

    def gather(self, seq_id):
        n = self.length[seq_id]
        k = torch.cat([self.k_pool[b] for b in self.table[seq_id]], dim=1)[:, :n]
        v = torch.cat([self.v_pool[b] for b in self.table[seq_id]], dim=1)[:, :n]
        return k, v

    def fork(self, src, dst):
        self.table[dst], self.length[dst] = list(self.table[src]), self.length[src]
        for b in self.table[dst]:
            self.refcount[b] += 1

    def free(self, seq_id):
        for b in self.table.pop(seq_id):
            self.refcount[b] -= 1
            if self.refcount[b] == 0:
                del self.refcount[b]
                self.free_set.add(b)
        del self.length[seq_id]
'''),
    Answer("PagedKVCache", "a stack of free ids, (blocks, length) pairs, gather by indexing (block, slot) per position",
           '''
class PagedKVCache:
    def __init__(self, num_blocks, block_size, num_heads, head_dim, dtype=torch.float32):
        self.size = block_size
        self.pool = {"k": torch.zeros(num_blocks, num_heads, block_size, head_dim, dtype=dtype),
                     "v": torch.zeros(num_blocks, num_heads, block_size, head_dim, dtype=dtype)}
        self.stack = list(reversed(range(num_blocks)))
        self.users = [0] * num_blocks
        self.seqs = {}

    @property
    def num_free_blocks(self):
        return len(self.stack)

    def block_table(self, seq_id):
        return self.seqs[seq_id][0][:]

    def append(self, seq_id, k, v):
        blocks, length = self.seqs.get(seq_id, ([], 0))
        blocks = blocks[:]
        t = k.shape[1]
        cow = length % self.size != 0 and self.users[blocks[-1]] >= 2
        grow = max(0, math.ceil((length + t) / self.size) - len(blocks))
        if grow + cow > len(self.stack):
            raise RuntimeError("PagedKVCache: out of blocks")
        if cow:
            src, dst = blocks[-1], self.stack.pop()
            for name in ("k", "v"):
                self.pool[name][dst].copy_(self.pool[name][src])
            self.users[src] -= 1
            self.users[dst] = 1
            blocks[-1] = dst
        for _ in range(grow):
            b = self.stack.pop()
            self.users[b] = 1
            blocks.append(b)
        for j in range(t):
            p = length + j
            self.pool["k"][blocks[p // self.size], :, p % self.size] = k[:, j]
            self.pool["v"][blocks[p // self.size], :, p % self.size] = v[:, j]
        self.seqs[seq_id] = (blocks, length + t)

    def gather(self, seq_id):
        blocks, length = self.seqs[seq_id]
        pos = torch.arange(length)
        idx, slot = torch.tensor(blocks, dtype=torch.long)[pos // self.size], pos % self.size
        return self.pool["k"][idx, :, slot].transpose(0, 1), self.pool["v"][idx, :, slot].transpose(0, 1)

    def fork(self, src, dst):
        blocks, length = self.seqs[src]
        self.seqs[dst] = (blocks[:], length)
        for b in blocks:
            self.users[b] += 1

    def free(self, seq_id):
        blocks, _ = self.seqs.pop(seq_id)
        for b in blocks:
            self.users[b] -= 1
            if self.users[b] == 0:
                self.stack.append(b)
'''),
]
