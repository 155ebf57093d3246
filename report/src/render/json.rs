//! JSON: the report as serde writes it, with the analysis woven in: each
//! range and heavy kernel gets an `analysis` object, the top level the
//! `answer`, `findings`, `peaks` and `analysis_notes`. Reading a report back ignores
//! them; the analysis is recomputed from the data.
//!
//! Written straight to the output as serde walks the report: no tree of
//! values in between (building one and inserting into it took 7x longer
//! and 3x the memory for a report of 300,000 ranges). Floats the report
//! holds as `f32` are written at their own precision.

use crate::analysis::{Analysis, KernelAnalysis};
use crate::report::Report;
use serde::ser::{self, Serialize, SerializeMap, SerializeStruct, Serializer};
use std::collections::HashMap;
use std::io;

pub(super) fn render(r: &Report, a: &Analysis) -> String {
    text(|out| write(r, a, out))
}

/// What `write` writes, as a string (empty if it fails).
pub(super) fn text(write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>) -> String {
    let mut out = Vec::new();
    if write(&mut out).is_err() {
        return String::new();
    }
    // serde_json writes UTF-8 only.
    String::from_utf8(out).unwrap_or_default()
}

/// Writes the report with its analysis, indented, to `w`.
pub(super) fn write(r: &Report, a: &Analysis, w: impl io::Write) -> serde_json::Result<()> {
    let mut kernels: HashMap<&str, &KernelAnalysis> = HashMap::with_capacity(a.kernels.len());
    for k in &a.kernels {
        kernels.entry(k.name.as_str()).or_insert(k);
    }
    let top = Top { r, a, kernels };
    let mut ser = serde_json::Serializer::pretty(w);
    r.serialize(Hooked { inner: &mut ser, hook: &top })
}

/// Writes a job's report with its answer (where it has one), indented, to
/// `w`.
pub(super) fn write_job(
    job: &crate::report::JobReport,
    answer: Option<&crate::analysis::job::JobAnswer>,
    w: impl io::Write,
) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::pretty(w);
    match answer {
        Some(a) => job.serialize(Hooked { inner: &mut ser, hook: &Appended("answer", a) }),
        None => job.serialize(&mut ser),
    }
}

/// What a [`Hooked`] serializer changes in the struct or map it writes.
/// Fields are replaced only in a struct: a type serde writes as a map (one
/// with a flattened field) gets the extra fields only, and a newtype or
/// anything else is refused.
trait Hook {
    /// Writes field `key` itself, in place of the value serde has for it;
    /// `None`: the value is written as it is.
    fn replace<S: SerializeStruct>(&self, s: &mut S, key: &'static str) -> Option<Result<(), S::Error>>;
    /// Fields written after the struct's or map's own.
    fn extra(&self) -> usize;
    /// Writes the [`Hook::extra`] fields into a struct.
    fn append_struct<S: SerializeStruct>(&self, s: &mut S) -> Result<(), S::Error>;
    /// Writes the [`Hook::extra`] fields into a map.
    fn append_map<S: SerializeMap>(&self, s: &mut S) -> Result<(), S::Error>;
}

/// The report's top level: ranges and kernels each with their analysis,
/// then the analysis's own fields.
struct Top<'a> {
    r: &'a Report,
    a: &'a Analysis,
    kernels: HashMap<&'a str, &'a KernelAnalysis>,
}

impl Hook for Top<'_> {
    fn replace<S: SerializeStruct>(&self, s: &mut S, key: &'static str) -> Option<Result<(), S::Error>> {
        match key {
            // The analysis has one entry per range, in the report's order.
            "ranges" => Some(
                s.serialize_field(key, &Each(self.r.ranges.iter().enumerate().map(|(i, g)| (g, self.a.ranges.get(i))))),
            ),
            "kernels" => Some(s.serialize_field(
                key,
                &Each(self.r.kernels.iter().map(|k| (k, self.kernels.get(k.name.as_str()).copied()))),
            )),
            _ => None,
        }
    }

    fn extra(&self) -> usize {
        4
    }

    fn append_struct<S: SerializeStruct>(&self, s: &mut S) -> Result<(), S::Error> {
        s.serialize_field("answer", &self.a.answer)?;
        s.serialize_field("findings", &self.a.findings)?;
        s.serialize_field("peaks", &self.a.peaks)?;
        s.serialize_field("analysis_notes", &self.a.notes)
    }

    fn append_map<S: SerializeMap>(&self, s: &mut S) -> Result<(), S::Error> {
        s.serialize_entry("answer", &self.a.answer)?;
        s.serialize_entry("findings", &self.a.findings)?;
        s.serialize_entry("peaks", &self.a.peaks)?;
        s.serialize_entry("analysis_notes", &self.a.notes)
    }
}

/// A struct or map with one more field at its end: `(key, value)`.
struct Appended<'a, T>(&'static str, &'a T);

impl<T: Serialize> Hook for Appended<'_, T> {
    fn replace<S: SerializeStruct>(&self, _: &mut S, _: &'static str) -> Option<Result<(), S::Error>> {
        None
    }

    fn extra(&self) -> usize {
        1
    }

    fn append_struct<S: SerializeStruct>(&self, s: &mut S) -> Result<(), S::Error> {
        s.serialize_field(self.0, self.1)
    }

    fn append_map<S: SerializeMap>(&self, s: &mut S) -> Result<(), S::Error> {
        s.serialize_entry(self.0, self.1)
    }
}

/// A sequence of items, each with its analysis where it has one.
struct Each<I>(I);

impl<'a, I, T, A> Serialize for Each<I>
where
    I: Iterator<Item = (&'a T, Option<&'a A>)> + Clone,
    T: Serialize + 'a,
    A: Serialize + 'a,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.clone().map(|(item, analysis)| Item { item, analysis }))
    }
}

struct Item<'a, T, A> {
    item: &'a T,
    analysis: Option<&'a A>,
}

impl<T: Serialize, A: Serialize> Serialize for Item<'_, T, A> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.analysis {
            Some(a) => self.item.serialize(Hooked { inner: s, hook: &Appended("analysis", a) }),
            None => self.item.serialize(s),
        }
    }
}

/// A serializer that writes what `inner` would, with `hook`'s changes to
/// the outermost struct or map (what is nested in it is written as it is).
struct Hooked<'h, S, H> {
    inner: S,
    hook: &'h H,
}

/// The outermost struct or map of a [`Hooked`] serializer.
struct HookedCompound<'h, C, H> {
    inner: C,
    hook: &'h H,
}

fn not_a_struct<E: ser::Error>() -> E {
    E::custom("only a struct or a map takes an analysis")
}

impl<'h, S: Serializer, H: Hook> Serializer for Hooked<'h, S, H> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = ser::Impossible<S::Ok, S::Error>;
    type SerializeTuple = ser::Impossible<S::Ok, S::Error>;
    type SerializeTupleStruct = ser::Impossible<S::Ok, S::Error>;
    type SerializeTupleVariant = ser::Impossible<S::Ok, S::Error>;
    type SerializeMap = HookedCompound<'h, S::SerializeMap, H>;
    type SerializeStruct = HookedCompound<'h, S::SerializeStruct, H>;
    type SerializeStructVariant = ser::Impossible<S::Ok, S::Error>;

    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Self::SerializeStruct, S::Error> {
        Ok(HookedCompound { inner: self.inner.serialize_struct(name, len + self.hook.extra())?, hook: self.hook })
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        let extra = self.hook.extra();
        Ok(HookedCompound { inner: self.inner.serialize_map(len.map(|n| n + extra))?, hook: self.hook })
    }

    fn serialize_bool(self, _: bool) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_i8(self, _: i8) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_i16(self, _: i16) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_i32(self, _: i32) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_i64(self, _: i64) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_u8(self, _: u8) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_u16(self, _: u16) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_u32(self, _: u32) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_u64(self, _: u64) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_f32(self, _: f32) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_f64(self, _: f64) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_char(self, _: char) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_str(self, _: &str) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, _: &T) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<S::Ok, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        Err(not_a_struct())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        Err(not_a_struct())
    }
}

impl<C: SerializeStruct, H: Hook> SerializeStruct for HookedCompound<'_, C, H> {
    type Ok = C::Ok;
    type Error = C::Error;

    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), C::Error> {
        match self.hook.replace(&mut self.inner, key) {
            Some(done) => done,
            None => self.inner.serialize_field(key, value),
        }
    }

    fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
        self.inner.skip_field(key)
    }

    fn end(mut self) -> Result<C::Ok, C::Error> {
        self.hook.append_struct(&mut self.inner)?;
        self.inner.end()
    }
}

impl<C: SerializeMap, H: Hook> SerializeMap for HookedCompound<'_, C, H> {
    type Ok = C::Ok;
    type Error = C::Error;

    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), C::Error> {
        self.inner.serialize_key(key)
    }

    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), C::Error> {
        self.inner.serialize_value(value)
    }

    fn serialize_entry<K: ?Sized + Serialize, V: ?Sized + Serialize>(&mut self, k: &K, v: &V) -> Result<(), C::Error> {
        self.inner.serialize_entry(k, v)
    }

    fn end(mut self) -> Result<C::Ok, C::Error> {
        self.hook.append_map(&mut self.inner)?;
        self.inner.end()
    }
}
