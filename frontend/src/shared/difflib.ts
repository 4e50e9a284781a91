// Python's difflib.unified_diff, ported line for line (SequenceMatcher without a junk function, with its
// automatic junk heuristic), so the page shows an edit's diff exactly as the email, Slack and the review page
// do (src/signoff/core/argument_views.py). A Myers diff (the npm `diff` package) is as correct but often
// pairs lines otherwise, and the channels must not disagree on what changed.

type Block = [a: number, b: number, size: number];
type Opcode = [tag: "equal" | "replace" | "delete" | "insert", i1: number, i2: number, j1: number, j2: number];

class SequenceMatcher {
  private readonly b2j = new Map<string, number[]>();

  constructor(
    private readonly a: string[],
    private readonly b: string[],
  ) {
    b.forEach((line, j) => {
      const indices = this.b2j.get(line);
      if (indices) indices.push(j);
      else this.b2j.set(line, [j]);
    });
    if (b.length >= 200) {
      const most = Math.floor(b.length / 100) + 1;
      for (const [line, indices] of [...this.b2j]) if (indices.length > most) this.b2j.delete(line);
    }
  }

  private longestMatch(alo: number, ahi: number, blo: number, bhi: number): Block {
    const { a, b } = this;
    let [besti, bestj, bestsize] = [alo, blo, 0];
    let j2len = new Map<number, number>();
    for (let i = alo; i < ahi; i++) {
      const next = new Map<number, number>();
      for (const j of this.b2j.get(a[i]) ?? []) {
        if (j < blo) continue;
        if (j >= bhi) break;
        const k = (j2len.get(j - 1) ?? 0) + 1;
        next.set(j, k);
        if (k > bestsize) [besti, bestj, bestsize] = [i - k + 1, j - k + 1, k];
      }
      j2len = next;
    }
    while (besti > alo && bestj > blo && a[besti - 1] === b[bestj - 1]) [besti, bestj, bestsize] = [besti - 1, bestj - 1, bestsize + 1];
    while (besti + bestsize < ahi && bestj + bestsize < bhi && a[besti + bestsize] === b[bestj + bestsize]) bestsize++;
    return [besti, bestj, bestsize];
  }

  private matchingBlocks(): Block[] {
    const [la, lb] = [this.a.length, this.b.length];
    const queue: [number, number, number, number][] = [[0, la, 0, lb]];
    const blocks: Block[] = [];
    while (queue.length > 0) {
      const [alo, ahi, blo, bhi] = queue.pop()!;
      const [i, j, k] = this.longestMatch(alo, ahi, blo, bhi);
      if (k === 0) continue;
      blocks.push([i, j, k]);
      if (alo < i && blo < j) queue.push([alo, i, blo, j]);
      if (i + k < ahi && j + k < bhi) queue.push([i + k, ahi, j + k, bhi]);
    }
    blocks.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    const joined: Block[] = [];
    let [i1, j1, k1] = [0, 0, 0];
    for (const [i2, j2, k2] of blocks) {
      if (i1 + k1 === i2 && j1 + k1 === j2) k1 += k2;
      else {
        if (k1) joined.push([i1, j1, k1]);
        [i1, j1, k1] = [i2, j2, k2];
      }
    }
    if (k1) joined.push([i1, j1, k1]);
    joined.push([la, lb, 0]);
    return joined;
  }

  opcodes(): Opcode[] {
    let [i, j] = [0, 0];
    const answer: Opcode[] = [];
    for (const [ai, bj, size] of this.matchingBlocks()) {
      if (i < ai && j < bj) answer.push(["replace", i, ai, j, bj]);
      else if (i < ai) answer.push(["delete", i, ai, j, bj]);
      else if (j < bj) answer.push(["insert", i, ai, j, bj]);
      [i, j] = [ai + size, bj + size];
      if (size) answer.push(["equal", ai, i, bj, j]);
    }
    return answer;
  }

  groupedOpcodes(n: number): Opcode[][] {
    const codes = this.opcodes();
    if (codes.length === 0) codes.push(["equal", 0, 1, 0, 1]);
    const first = codes[0];
    if (first[0] === "equal") codes[0] = ["equal", Math.max(first[1], first[2] - n), first[2], Math.max(first[3], first[4] - n), first[4]];
    const last = codes[codes.length - 1];
    if (last[0] === "equal") codes[codes.length - 1] = ["equal", last[1], Math.min(last[2], last[1] + n), last[3], Math.min(last[4], last[3] + n)];
    const groups: Opcode[][] = [];
    let group: Opcode[] = [];
    for (const code of codes) {
      let [tag, i1, i2, j1, j2] = code;
      if (tag === "equal" && i2 - i1 > 2 * n) {
        group.push([tag, i1, Math.min(i2, i1 + n), j1, Math.min(j2, j1 + n)]);
        groups.push(group);
        group = [];
        [i1, j1] = [Math.max(i1, i2 - n), Math.max(j1, j2 - n)];
      }
      group.push([tag, i1, i2, j1, j2]);
    }
    if (group.length > 0 && !(group.length === 1 && group[0][0] === "equal")) groups.push(group);
    return groups;
  }
}

function range(start: number, stop: number): string {
  const length = stop - start;
  if (length === 1) return `${start + 1}`;
  return `${length ? start + 1 : start},${length}`;
}

/** `difflib.unified_diff(a, b, lineterm="", n=context)` without its `---` and `+++` lines. */
export function unifiedDiff(a: string[], b: string[], context: number): string[] {
  const lines: string[] = [];
  for (const group of new SequenceMatcher(a, b).groupedOpcodes(context)) {
    const [first, last] = [group[0], group[group.length - 1]];
    lines.push(`@@ -${range(first[1], last[2])} +${range(first[3], last[4])} @@`);
    for (const [tag, i1, i2, j1, j2] of group) {
      if (tag === "equal") {
        lines.push(...a.slice(i1, i2).map((line) => ` ${line}`));
        continue;
      }
      if (tag !== "insert") lines.push(...a.slice(i1, i2).map((line) => `-${line}`));
      if (tag !== "delete") lines.push(...b.slice(j1, j2).map((line) => `+${line}`));
    }
  }
  return lines;
}
