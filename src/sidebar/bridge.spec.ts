import { describe, expect, it } from 'vitest';
import {
  classifyImportError,
  EXECUTABLE_EXPR,
  IMPORT_CODE,
  installCommand,
  KernelBridge,
  parsePyStr,
  shellQuote,
  type BridgeKernel,
  type BridgeState
} from './bridge';
import type { KernelMessage } from './messages';

const flush = async (n = 5) => {
  for (let i = 0; i < n; i++) {
    await new Promise(resolve => setTimeout(resolve, 0));
  }
};

class FakeComm {
  opened: unknown = undefined;
  sent: any[] = [];
  closed = false;
  isDisposed = false;
  onMsg: (msg: any) => void = () => undefined;
  onClose: (msg: any) => void = () => undefined;
  constructor(readonly target: string) {}
  open(data: unknown) {
    this.opened = data;
    return { done: Promise.resolve() };
  }
  send(data: unknown) {
    this.sent.push(data);
    return { done: Promise.resolve() };
  }
  close() {
    this.closed = true;
    this.isDisposed = true;
  }
  deliver(data: unknown) {
    this.onMsg({ content: { data } });
  }
}

type Reply = Record<string, unknown>;

class FakeKernel {
  id = 'k1';
  name = 'python3';
  info: Promise<any>;
  executes: any[] = [];
  comms: FakeComm[] = [];
  /** Replies to IMPORT_CODE; a deferred one lets a test change kernels mid-connect. */
  importReply: () => Promise<Reply> = async () => ({
    status: 'ok',
    user_expressions: {}
  });
  executable = "'/opt/env/bin/python'";
  status = 'idle';
  connectionStatus = 'connected';
  reconnects = 0;
  async reconnect() {
    this.reconnects++;
  }
  constructor(language = 'python') {
    this.info = Promise.resolve({ language_info: { name: language } });
  }
  requestExecute(content: any) {
    this.executes.push(content);
    const reply =
      content.code === IMPORT_CODE
        ? this.importReply()
        : Promise.resolve({
            status: 'ok',
            user_expressions: {
              executable: {
                status: 'ok',
                data: { 'text/plain': this.executable }
              }
            }
          });
    return { done: reply.then(r => ({ content: r })) };
  }
  createComm(target: string) {
    const comm = new FakeComm(target);
    this.comms.push(comm);
    return comm;
  }
  get comm(): FakeComm {
    return this.comms[this.comms.length - 1];
  }
}

const HELLO = {
  type: 'hello',
  protocol: 1,
  version: '0.1.0',
  python: '3.12.3',
  executable: '/opt/env/bin/python',
  pid: 7,
  capabilities: { check: true, bench: true, watch: true, export: true },
  reports: [],
  armed: false
};

function setup(since: number | null = null, restartNudgeMs = 5000) {
  const states: BridgeState['kind'][] = [];
  const messages: KernelMessage[] = [];
  const bridge = new KernelBridge({
    onState: s => states.push(s.kind),
    onMessage: m => messages.push(m),
    since: () => since,
    restartNudgeMs
  });
  return { bridge, states, messages };
}

const asKernel = (k: FakeKernel) => k as unknown as BridgeKernel;

describe('KernelBridge', () => {
  it('imports gpusight silently, opens the comm and is ready on hello', async () => {
    const { bridge, states, messages } = setup();
    const k = new FakeKernel();
    bridge.setKernel(asKernel(k));
    await flush();
    expect(k.executes[0]).toMatchObject({
      code: IMPORT_CODE,
      silent: true,
      store_history: false
    });
    expect(k.comm.target).toBe('gpusight');
    expect(k.comm.opened).toEqual({ type: 'hello', protocol: 1 });
    expect(bridge.state.kind).toBe('connecting');
    expect(bridge.request('check')).toBeNull(); // not ready: nothing is sent
    k.comm.deliver(HELLO);
    expect(states).toEqual(['connecting', 'ready']);
    expect(bridge.connects).toBe(1);
    expect(messages.map(m => m.type)).toEqual(['hello']);
    const id = bridge.request('check');
    expect(id).toMatch(/^check-\d+$/);
    expect(k.comm.sent).toEqual([{ type: 'check', request: id }]);
  });

  it('says gpusight is missing and where to install it', async () => {
    const { bridge } = setup();
    const k = new FakeKernel();
    k.importReply = async () => ({
      status: 'error',
      ename: 'ModuleNotFoundError',
      evalue: "No module named 'gpusight'",
      traceback: []
    });
    k.executable = "'/tmp/no gs/bin/python3'";
    bridge.setKernel(asKernel(k));
    await flush();
    expect(k.executes[1]).toMatchObject({
      silent: true,
      user_expressions: { executable: EXECUTABLE_EXPR }
    });
    expect(bridge.state).toEqual({
      kind: 'missing',
      reason: 'absent',
      executable: '/tmp/no gs/bin/python3',
      error: "ModuleNotFoundError: No module named 'gpusight'"
    });
    expect(installCommand('/tmp/no gs/bin/python3')).toBe(
      "'/tmp/no gs/bin/python3' -m pip install gpusight"
    );
    expect(k.comms).toEqual([]);
  });

  it('tells an outdated gpusight from a broken one and from other errors', () => {
    expect(
      classifyImportError('ModuleNotFoundError', "No module named 'gpusight'")
    ).toBe('absent');
    expect(
      classifyImportError(
        'ModuleNotFoundError',
        "No module named 'gpusight.jupyter.comm'"
      )
    ).toBe('outdated');
    expect(
      classifyImportError('ImportError', "cannot import name 'x' from 'torch'")
    ).toBe('broken');
    expect(classifyImportError('SyntaxError', 'bad')).toBeNull();
  });

  it('refuses a kernel that is not Python', async () => {
    const { bridge } = setup();
    const k = new FakeKernel('R');
    bridge.setKernel(asKernel(k));
    await flush();
    expect(bridge.state).toEqual({ kind: 'unsupported', language: 'R' });
    expect(k.executes).toEqual([]);
  });

  it('reconnects after a restart and asks for what it missed', async () => {
    const { bridge, states } = setup(12.5);
    const k = new FakeKernel();
    bridge.setMonitor({ on: true, hz: 10, capacity: 600 });
    bridge.setKernel(asKernel(k));
    await flush();
    const first = k.comm;
    first.deliver(HELLO);
    expect(first.sent).toEqual([
      { type: 'monitor.start', hz: 10, capacity: 600, since: 12.5 }
    ]);
    bridge.kernelStatus('restarting');
    expect(bridge.state.kind).toBe('restarting');
    expect(first.closed).toBe(false); // the old kernel's comms died with it
    bridge.kernelStatus('unknown');
    expect(bridge.state.kind).toBe('restarting');
    bridge.kernelStatus('starting'); // the new process says it is up
    await flush();
    bridge.kernelStatus('idle'); // already connecting: no second comm
    await flush();
    expect(k.comms).toHaveLength(2);
    first.deliver(HELLO); // a late message on the old comm is ignored
    expect(bridge.connects).toBe(1);
    k.comm.deliver({ ...HELLO, pid: 8 });
    expect(bridge.connects).toBe(2);
    expect(k.comm.sent[0]).toMatchObject({ type: 'monitor.start' });
    expect(states).toEqual([
      'connecting',
      'ready',
      'restarting',
      'connecting',
      'ready'
    ]);
    bridge.kernelStatus('dead');
    expect(bridge.state.kind).toBe('dead');
  });

  it('reconnects when the session says the restart is over (same kernel again)', async () => {
    const { bridge } = setup();
    const k = new FakeKernel();
    bridge.setKernel(asKernel(k));
    await flush();
    k.comm.deliver(HELLO);
    bridge.setKernel(asKernel(k)); // the same kernel while connected: nothing to do
    expect(k.comms).toHaveLength(1);
    bridge.kernelStatus('restarting');
    bridge.setKernel(asKernel(k)); // SessionContext.kernelChanged after restartKernel()
    await flush();
    expect(k.comms).toHaveLength(2);
    k.comm.deliver({ ...HELLO, pid: 9 });
    expect(bridge.state.kind).toBe('ready');
  });

  it('reconnects the websocket once when a restarted kernel never answers', async () => {
    const { bridge } = setup(null, 20);
    const k = new FakeKernel();
    bridge.setKernel(asKernel(k));
    await flush();
    k.comm.deliver(HELLO);
    // JupyterLab 4.6 can keep requests sent during a restart queued: the import never returns.
    k.importReply = () => new Promise(() => undefined);
    bridge.kernelStatus('restarting');
    bridge.kernelStatus('starting');
    await new Promise(resolve => setTimeout(resolve, 60));
    expect(k.reconnects).toBe(1);
    expect(bridge.nudges).toBe(1);
    await new Promise(resolve => setTimeout(resolve, 60));
    expect(k.reconnects).toBe(1); // once per restart
  });

  it('does not nudge a restarted kernel that answers, or one that is busy', async () => {
    const { bridge } = setup(null, 20);
    const k = new FakeKernel();
    bridge.setKernel(asKernel(k));
    await flush();
    k.comm.deliver(HELLO);
    bridge.kernelStatus('restarting');
    bridge.kernelStatus('starting'); // answers at once
    await new Promise(resolve => setTimeout(resolve, 60));
    expect(k.reconnects).toBe(0);
    k.importReply = () => new Promise(() => undefined);
    k.status = 'busy'; // "restart and run all": the import waits behind the user's cells
    bridge.kernelStatus('restarting');
    bridge.kernelStatus('busy');
    await new Promise(resolve => setTimeout(resolve, 60));
    expect(k.reconnects).toBe(0);
  });

  it('drops a result that arrives after the kernel changed', async () => {
    const { bridge } = setup();
    const slow = new FakeKernel();
    let release: (r: Reply) => void = () => undefined;
    slow.importReply = () => new Promise(resolve => (release = resolve));
    bridge.setKernel(asKernel(slow));
    await flush();
    const fast = new FakeKernel();
    fast.id = 'k2';
    bridge.setKernel(asKernel(fast));
    await flush();
    release({ status: 'ok' });
    await flush();
    expect(slow.comms).toEqual([]); // the old kernel's import came back too late
    expect(fast.comms).toHaveLength(1);
    fast.comm.deliver(HELLO);
    expect(bridge.kernel).toBe(asKernel(fast));
    expect(bridge.state.kind).toBe('ready');
  });

  it('closes the comm when it stops following a kernel', async () => {
    const { bridge } = setup();
    const k = new FakeKernel();
    bridge.setKernel(asKernel(k));
    await flush();
    k.comm.deliver(HELLO);
    bridge.setKernel(null);
    expect(k.comm.closed).toBe(true);
    expect(bridge.state.kind).toBe('idle');
    bridge.dispose();
    expect(bridge.isDisposed).toBe(true);
  });

  it('counts and drops messages that fail their guard', async () => {
    const { bridge, messages } = setup();
    const k = new FakeKernel();
    bridge.setKernel(asKernel(k));
    await flush();
    k.comm.deliver(HELLO);
    k.comm.deliver({ type: 'tick', tick: { t: 'soon' } });
    k.comm.deliver('<script>');
    k.comm.deliver({ type: 'tick', tick: { t: 1, gpus: [], host: {} } });
    expect(bridge.rejected).toBe(2);
    expect(messages.map(m => m.type)).toEqual(['hello', 'tick']);
  });

  it('sends monitor wishes once, and stop when turned off', async () => {
    const { bridge } = setup();
    const k = new FakeKernel();
    bridge.setKernel(asKernel(k));
    await flush();
    k.comm.deliver(HELLO);
    expect(k.comm.sent).toEqual([]); // monitor off: nothing to ask
    bridge.setMonitor({ on: true, hz: 5, capacity: 3000 });
    bridge.setMonitor({ on: true, hz: 5, capacity: 3000 });
    bridge.setMonitor({ on: true, hz: 8, capacity: 3000 });
    bridge.setMonitor({ on: false, hz: 8, capacity: 3000 });
    expect(k.comm.sent.map(m => [m.type, m.hz])).toEqual([
      ['monitor.start', 5],
      ['monitor.start', 8],
      ['monitor.stop', undefined]
    ]);
  });

  it('fails with the reason when the kernel closes the comm', async () => {
    const { bridge } = setup();
    const k = new FakeKernel();
    bridge.setKernel(asKernel(k));
    await flush();
    k.comm.onClose({});
    expect(bridge.state).toEqual({
      kind: 'failed',
      error: 'the kernel closed the gpusight comm'
    });
    bridge.retry();
    await flush();
    expect(k.comms).toHaveLength(2);
  });
});

describe('helpers', () => {
  it('parses Python string reprs', () => {
    expect(parsePyStr("'/usr/bin/python3'")).toBe('/usr/bin/python3');
    expect(parsePyStr("'C:\\\\Python\\\\python.exe'")).toBe(
      'C:\\Python\\python.exe'
    );
    expect(parsePyStr('"it\'s"')).toBe("it's");
    expect(parsePyStr('None')).toBeNull();
  });

  it('quotes paths for a shell only when needed', () => {
    expect(shellQuote('/opt/conda/envs/a-1/bin/python')).toBe(
      '/opt/conda/envs/a-1/bin/python'
    );
    expect(shellQuote("/x/it's here/python")).toBe("'/x/it'\\''s here/python'");
    expect(installCommand(null)).toBe('python -m pip install gpusight');
  });
});
