//! Key segments: every encoding round-trips, and its UTF-8 byte order (DynamoDB's order of
//! `Child`) equals the type's order.

use std::fmt::Debug;

use dynatree::keys::KeySegment;
use proptest::prelude::*;

fn check<T: KeySegment + Ord + Debug>(a: &T, b: &T) -> Result<(), TestCaseError> {
    let (ea, eb) = (a.encode(), b.encode());
    prop_assert!(!ea.is_empty());
    prop_assert_eq!(&T::decode(&ea).unwrap(), a);
    prop_assert_eq!(&T::decode(&eb).unwrap(), b);
    prop_assert_eq!(
        a.cmp(b),
        ea.as_bytes().cmp(eb.as_bytes()),
        "{:?} {:?} -> {} {}",
        a,
        b,
        ea,
        eb
    );
    Ok(())
}

macro_rules! order_tests {
    ($($name:ident: $t:ty => $strat:expr;)*) => {
        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]
            $(
                #[test]
                fn $name(a in $strat, b in $strat) {
                    check::<$t>(&a, &b)?;
                }
            )*
        }
    };
}

order_tests! {
    u8_order: u8 => any::<u8>();
    u16_order: u16 => any::<u16>();
    u32_order: u32 => any::<u32>();
    u64_order: u64 => any::<u64>();
    u128_order: u128 => any::<u128>();
    usize_order: usize => any::<usize>();
    i8_order: i8 => any::<i8>();
    i16_order: i16 => any::<i16>();
    i32_order: i32 => any::<i32>();
    i64_order: i64 => any::<i64>();
    i128_order: i128 => any::<i128>();
    isize_order: isize => any::<isize>();
    bool_order: bool => any::<bool>();
    string_order: String => "\\PC{1,12}";
    ulid_order: ulid::Ulid => any::<u128>().prop_map(ulid::Ulid::from);
    uuid_order: uuid::Uuid => any::<u128>().prop_map(uuid::Uuid::from_u128);
    date_order: time::Date => (0i32..=9999, 1u8..=12, 1u8..=28)
        .prop_map(|(y, m, d)| time::Date::from_calendar_date(y, time::Month::try_from(m).unwrap(), d).unwrap());
    datetime_order: time::OffsetDateTime => (0i64..253_402_300_799, 0u32..1_000_000_000)
        .prop_map(|(s, n)| time::OffsetDateTime::from_unix_timestamp(s - 62_167_219_200).unwrap().replace_nanosecond(n).unwrap());
}

#[test]
fn datetimes_decode_in_utc() {
    let t = time::OffsetDateTime::from_unix_timestamp(1_700_000_000)
        .unwrap()
        .to_offset(time::UtcOffset::from_hms(5, 30, 0).unwrap());
    let e = t.encode();
    assert_eq!(e, "2023-11-14T22:13:20.000000000Z");
    assert_eq!(time::OffsetDateTime::decode(&e).unwrap(), t);
}

#[test]
fn foreign_strings_are_refused() {
    assert!(
        uuid::Uuid::decode("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11").is_err(),
        "uppercase is not the encoding"
    );
    assert!(ulid::Ulid::decode("not-a-ulid").is_err());
    assert!(time::Date::decode("2026-13-01").is_err());
    assert!(
        i32::decode("-5").is_err(),
        "signed integers are stored offset, not with a sign"
    );
}
