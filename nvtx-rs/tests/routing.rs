//! Emitter -> tool side -> handler, in one process.

use gpuscope_nvtx::tool::{self, Event};
use gpuscope_nvtx::{Attributes, Domain, Payload};
use std::sync::{Arc, Mutex};

// The handler is process-wide: tests that install one take turns.
static SERIAL: Mutex<()> = Mutex::new(());

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl tool::Handler for Recorder {
    fn event(&self, e: &Event<'_>) {
        let d = |id: u32| tool::domain_name(id).unwrap_or("-").to_string();
        let s = match e {
            Event::Push { domain, attributes } => {
                format!("push {} {}", d(*domain), attributes.message)
            }
            Event::Pop { domain } => format!("pop {}", d(*domain)),
            Event::Start { domain, attributes, .. } => format!("start {} {}", d(*domain), attributes.message),
            Event::End { domain, .. } => format!("end {}", d(*domain)),
            Event::Mark { domain, attributes } => {
                format!("mark {} {}", d(*domain), attributes.message)
            }
            Event::NameThread { name, .. } => format!("thread {name}"),
            Event::NameCategory { category, name, .. } => format!("category {category} {name}"),
        };
        self.0.lock().unwrap().push(s);
    }
}

#[test]
fn every_emitter_call_reaches_the_handler_in_order() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert!(tool::attach());
    let rec = Arc::new(Recorder::default());
    tool::set_handler(Some(rec.clone()));

    {
        let _a = gpuscope_nvtx::push("outer");
        let _b = gpuscope_nvtx::push_with(
            "inner",
            &Attributes { color: Some(0xff00ff00), category: 7, payload: Some(Payload::U64(42)) },
        );
        gpuscope_nvtx::mark("here");
        let _e = gpuscope_nvtx::push_c(c"as a C string");
    }
    let io = Domain::new("io");
    assert_eq!(Domain::new("io"), io, "domains are de-duplicated by name");
    {
        let _c = io.push("read");
        let hot = io.register_string("hot loop");
        let _d = io.push_registered(hot);
        let r = io.start_range("async");
        std::thread::spawn(move || r.end()).join().unwrap();
    }
    gpuscope_nvtx::name_current_thread("main");
    io.name_category(3, "disk");
    // A pop with nothing pushed is delivered too: tools decide what it means.
    gpuscope_nvtx::pop();

    tool::set_handler(None);
    gpuscope_nvtx::mark("after the handler is gone");
    let got = rec.0.lock().unwrap().clone();
    assert_eq!(
        got,
        [
            "push - outer",
            "push - inner",
            "mark - here",
            "push - as a C string",
            "pop -",
            "pop -",
            "pop -",
            "push io read",
            "push io hot loop",
            "start io async",
            "end io",
            "pop io",
            "pop io",
            "thread main",
            "category 3 disk",
            "pop -",
        ]
    );
}

#[test]
fn attributes_and_payloads_arrive_intact() {
    type Seen = (u32, Option<u32>, Option<Payload>);
    #[derive(Default)]
    struct Attrs(Mutex<Vec<Seen>>);
    impl tool::Handler for Attrs {
        fn event(&self, e: &Event<'_>) {
            if let Event::Push { attributes: a, .. } = e {
                if a.message.starts_with("attrs-test") {
                    self.0.lock().unwrap().push((a.category, a.color, a.payload));
                }
            }
        }
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert!(tool::attach());
    let rec = Arc::new(Attrs::default());
    tool::set_handler(Some(rec.clone()));
    let d = Domain::new("attrs");
    let a = Attributes { color: Some(0x80112233), category: 9, payload: Some(Payload::F64(2.5)) };
    drop(gpuscope_nvtx::push_with("attrs-test default", &a));
    let b = Attributes { color: None, category: 0, payload: Some(Payload::I64(-3)) };
    drop(d.push_with("attrs-test domain", &b));
    drop(d.push("attrs-test plain"));
    tool::set_handler(None);
    assert_eq!(
        rec.0.lock().unwrap().as_slice(),
        &[(9, Some(0x80112233), Some(Payload::F64(2.5))), (0, None, Some(Payload::I64(-3))), (0, None, None)]
    );
}
